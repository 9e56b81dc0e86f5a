"""Working a review queue in real Chromium with the keyboard only, as a reviewer does: the keys
shown with ?, a value per rubric key with the digits, a note, Enter to submit and go on, s to
skip, k to go back; and the pairwise mode: the two runs' diff beside the choice, b for "B is
better", a reason, Ctrl+Enter. What was given is feedback on the runs."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agentlab.feedback.models import Feedback, FeedbackKey
from agentlab.review.models import Review
from tests.factories import make_queue, make_run

pytestmark = [pytest.mark.browser]


def test_working_a_queue_with_the_keyboard(page, live_url, user, staff):
    relevance = FeedbackKey.objects.create(name="relevance", kind="numeric", minimum=1,
                                           maximum=5, description="How well it answers")
    runs = [make_run(user, input="What is the weather in Paris?"),
            make_run(user, input="What is the weather in Rome?")]
    queue = make_queue(staff, [user], keys=[relevance], runs=runs, name="Weather answers")
    first, second = queue.items.order_by("pk")
    page.goto(f"{live_url}/review/{queue.pk}/work/")
    expect(page).to_have_url(f"{live_url}/review/{queue.pk}/items/{first.pk}/")
    expect(page.locator("#review-steps #step-3")).to_contain_text("get_weather")
    expect(page.locator("#review-progress")).to_contain_text("0 / 2")

    page.keyboard.press("?")
    expect(page.locator("#review-keys")).to_be_visible()
    page.keyboard.press("?")
    expect(page.locator("#review-keys")).to_be_hidden()

    # thumbs is highlighted first: 2 is "down"; then relevance: 4.
    thumbs, score = page.locator('[data-group="thumbs"]'), page.locator('[data-group^="key-"]')
    expect(thumbs).to_have_class("rubric-group is-active")
    page.keyboard.press("2")
    expect(thumbs.get_by_label("down")).to_be_checked()
    expect(score).to_have_class("rubric-group is-active")
    page.keyboard.press("4")
    expect(score.get_by_label("4")).to_be_checked()
    page.keyboard.press("n")
    page.keyboard.type("Right city, but it says tomorrow's weather.")
    page.keyboard.press("Escape")
    page.keyboard.press("Enter")

    # The next item, and the progress counts the first.
    expect(page).to_have_url(f"{live_url}/review/{queue.pk}/items/{second.pk}/")
    expect(page.locator("#review-progress")).to_contain_text("1 / 2")
    page.keyboard.press("s")
    expect(page.get_by_role("heading", name="Nothing left for you")).to_be_visible()
    expect(page.get_by_text("Review the 1 item you skipped")).to_be_visible()

    # Back to the first with k: what was given is filled in; 3 changes the highlighted key.
    page.goto(f"{live_url}/review/{queue.pk}/items/{second.pk}/")
    page.keyboard.press("k")
    expect(page).to_have_url(f"{live_url}/review/{queue.pk}/items/{first.pk}/")
    expect(page.locator(".review-state")).to_contain_text("You reviewed this item")
    expect(score.get_by_label("4")).to_be_checked()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("3")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Nothing left for you")).to_be_visible()

    assert sorted((f.name, f.label or f.score) for f in Feedback.objects.filter(run=runs[0])
                  ) == [("note", None), ("relevance", 3.0), ("thumbs", "down")]
    assert dict(Review.objects.values_list("item_id", "status")) == {
        first.pk: "done", second.pk: "skipped"}
    # It shows on the run's page like any feedback.
    page.goto(f"{live_url}/runs/{runs[0].pk}/")
    expect(page.locator("#run-feedback")).to_contain_text("relevance 3")
    expect(page.locator("#run-feedback")).to_contain_text("tomorrow's weather")


def test_pairwise_which_run_is_better(page, live_url, user, staff):
    question = "What is the weather in Paris?"
    a = make_run(user, agent_name="ReAct", input=question)
    b = make_run(user, agent_name="ReWOO", input=question,
                 steps=[{"kind": "tool", "name": "get_weather", "input": {"city": "Paris"},
                         "text": "Rain, 14 C"},
                        {"kind": "final", "text": "It rains in Paris.",
                         "output": "It rains in Paris."}])
    queue = make_queue(staff, [user], mode="pairwise", name="Which agent", pairs=[(a, b)])
    item = queue.items.get()
    page.goto(f"{live_url}/review/{queue.pk}/work/")
    expect(page.get_by_text("Different answers")).to_be_visible()
    expect(page.locator(".diff-rows").first).to_contain_text("get_weather")
    expect(page.locator(".diff-summary")).to_contain_text("It rains in Paris.")

    page.keyboard.press("b")
    expect(page.get_by_label("B is better")).to_be_checked()
    page.keyboard.press("n")
    page.keyboard.type("B looked the weather up and it does rain.")
    page.keyboard.press("Control+Enter")
    expect(page.get_by_role("heading", name="Nothing left for you")).to_be_visible()

    review = Review.objects.get(item=item)
    assert (review.choice, review.note) == ("b", "B looked the weather up and it does rain.")
    assert dict(Feedback.objects.filter(name="pairwise").values_list("run_id", "label")) == {
        a.pk: "worse", b.pk: "better"}
    page.goto(f"{live_url}/review/{queue.pk}/")
    expect(page.locator(f"#item-{item.pk}")).to_contain_text("alice: better: B")
