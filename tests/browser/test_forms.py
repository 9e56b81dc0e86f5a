"""Forms and actions as a newcomer meets them, in real Chromium: every page has its icon; the
Compare form's agent checkboxes sit beside their labels, in a styled box; the Chat index has a
heading and a question box with room to type; a run page says what Replay, Resume and Fork do
before they are clicked, Resume is not the primary button of a failed run, and a replay is
called a replay."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.factories import make_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def beside(page, label) -> None:
    """The label's checkbox is on the label's line, before its text."""
    box = label.locator("input[type=checkbox]").bounding_box()
    whole = label.bounding_box()
    assert whole["height"] < 40, whole  # one line, not a box above a label
    assert abs((box["y"] + box["height"] / 2) - (whole["y"] + whole["height"] / 2)) < 6
    assert box["x"] - whole["x"] < 4


def test_the_icon_and_the_compare_and_chat_forms(page, live_url, agent):
    page.goto(f"{live_url}/compare/")
    icon = page.locator("link[rel=icon]").get_attribute("href")
    response = page.request.get(live_url + icon)
    assert response.ok and "svg" in response.headers["content-type"]
    expect(page.get_by_role("heading", level=1)).to_have_text("Compare")
    label = page.locator(".compare-agents label.check", has_text="Calc agent")
    expect(label).to_contain_text("Calc agent (ReAct)")
    beside(page, label)
    assert page.locator(".compare-agents").evaluate(
        "el => getComputedStyle(el).borderTopStyle") == "solid"

    page.goto(f"{live_url}/chat/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Chat")
    question = page.get_by_label("Question for Calc agent")
    assert question.bounding_box()["width"] > 300
    beside(page, page.locator("form.run-once label.check").first)
    expect(page.locator(".agent-card .pill")).to_have_text("ReAct")
    assert page.js_errors == []


def test_a_run_page_says_what_each_action_does(page, live_url, user):
    failed = make_run(user, status="failed", error="The model server was unreachable.")
    replay = make_run(user, parent_run=failed, fork_seq=None, input="What is the weather?")
    page.goto(f"{live_url}/runs/{failed.pk}/")
    what = page.locator("#run-next")
    expect(what.locator("#replay-form")).to_contain_text("answers each LLM call with the reply "
                                                         "recorded here")
    expect(what.locator("#resume-form")).to_contain_text("Continues this run from its last step")
    expect(what).to_contain_text("It keeps the steps up to that one")
    resume = page.get_by_role("button", name="Resume")
    assert "secondary" in resume.get_attribute("class")  # not the primary action of a failure
    expect(what.get_by_label("Tools in the replay")).to_have_value("recorded")
    expect(page.locator("#run-head")).to_contain_text(f"run {replay.pk} (replay)")

    page.goto(f"{live_url}/runs/{replay.pk}/")
    expect(page.locator(".crumbs")).to_contain_text(f"replay of run {failed.pk}")
    expect(page.locator(".crumbs")).not_to_contain_text("fork")
    page.goto(f"{live_url}/runs/")
    expect(page.locator(f'tr[data-run="{replay.pk}"] .pill')).to_have_text("replay")
    assert page.js_errors == []
