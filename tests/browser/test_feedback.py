"""Giving feedback in real Chromium, as a person does on a run's page: thumbs with one click on
a step and on the run, a score and a note from the small form beside the step, then an edit
and a delete, each swapped in place by htmx without leaving the page."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agentlab.feedback.models import Feedback, FeedbackKey
from tests.factories import make_run

pytestmark = [pytest.mark.browser]


def test_feedback_on_a_step_and_on_the_run(page, live_url, user):
    run = make_run(user)
    FeedbackKey.objects.create(name="relevance", kind="numeric", minimum=1, maximum=5,
                               description="How well it answers the question")
    page.goto(f"{live_url}/runs/{run.pk}/")
    step = page.locator("#step-3")

    # Thumbs down on step 3: one click, pressed, counted.
    down = step.get_by_role("button", name="Thumbs down on step 3")
    down.click()
    expect(down).to_have_attribute("aria-pressed", "true")
    expect(down.locator(".count")).to_have_text("1")

    # A score and a note from the form beside the step.
    step.get_by_text("Feedback…").click()
    step.get_by_label("relevance").fill("4")
    step.get_by_label("Note").fill("Called the right tool, but twice.")
    step.get_by_role("button", name="Save feedback on step 3").click()
    expect(step.locator(".fb-item")).to_have_count(2)
    expect(step.locator(".fb-value")).to_have_text("relevance 4")
    expect(step.locator(".fb-note").last).to_have_text("Called the right tool, but twice.")
    expect(step.locator(".fb-who").first).to_contain_text("alice")
    # The thumb given before is still pressed (the whole strip came back).
    expect(step.get_by_role("button", name="Thumbs down on step 3")).to_have_attribute(
        "aria-pressed", "true")

    # The run as a whole: thumbs up and a note.
    whole = page.locator("#run-feedback")
    whole.get_by_role("button", name="Thumbs up on the run").click()
    expect(whole.get_by_role("button", name="Thumbs up on the run")).to_have_attribute(
        "aria-pressed", "true")
    whole.get_by_text("Feedback…").click()
    whole.get_by_label("Note").fill("Right answer, slow.")
    whole.get_by_role("button", name="Save feedback on the run").click()
    expect(whole.locator(".fb-note")).to_have_text("Right answer, slow.")

    # Edit the score in place.
    scored = step.locator(".fb-item", has_text="relevance 4")
    scored.get_by_role("link", name="Edit").click()
    editing = step.locator(".fb-editing")
    editing.get_by_label("relevance").fill("2")
    editing.get_by_role("button", name="Save").click()
    expect(step.locator(".fb-value")).to_have_text("relevance 2")
    expect(step.locator(".fb-item", has_text="relevance 2")).to_contain_text("(edited)")

    # Delete the note, after saying yes.
    page.once("dialog", lambda dialog: dialog.accept())
    step.locator(".fb-item", has_text="Called the right tool").get_by_role(
        "button", name="Delete").click()
    expect(step.locator(".fb-item")).to_have_count(1)

    # All of it was kept: a reload shows the same, and the rows say who and where.
    page.reload()
    expect(page.locator("#step-3 .fb-value")).to_have_text("relevance 2")
    expect(page.locator("#run-feedback .fb-note")).to_have_text("Right answer, slow.")
    assert sorted((f.seq, f.name, f.label or f.score) for f in Feedback.objects.all()) == [
        (0, "note", None), (0, "thumbs", "up"), (3, "relevance", 2.0), (3, "thumbs", "down")]
    assert not page.js_errors
