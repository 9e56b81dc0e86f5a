"""The trace viewer in real Chromium: step through a recorded run with the keys, open a
collapsed payload and the messages of an llm step, load a big run up to the last step, pick two
runs in the list and see where their diff parts. Runs are made directly in the database
(tests.test_trace_views.make_run); no model is involved."""

from __future__ import annotations

import re

import pytest

from tests.factories import big_run, demo_steps, make_run

pytestmark = [pytest.mark.browser]


def current_seq(page) -> str | None:
    return page.locator(".step.current").get_attribute("data-seq")


def test_step_through_a_run_with_the_keys(page, live_url, user):
    run = make_run(user)
    page.goto(f"{live_url}/runs/{run.pk}/")
    assert page.locator(".step.current").count() == 0
    page.keyboard.press("ArrowRight")
    page.wait_for_url(re.compile(r"\?step=1$"))
    assert current_seq(page) == "1"
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    page.wait_for_url(re.compile(r"\?step=3$"))
    page.keyboard.press("ArrowLeft")
    page.wait_for_url(re.compile(r"\?step=2$"))
    assert current_seq(page) == "2"
    assert "future" in page.locator("#step-3").get_attribute("class")
    assert "future" not in page.locator("#step-1").get_attribute("class")
    assert page.locator("#replay-label").inner_text() == "step 2 / 8"
    assert page.locator("#replay-slider").input_value() == "2"

    # Step 2 is an llm call: its conversation is one click away.
    page.click("#replay-messages")
    conversation = page.locator("#step-2 .conversation")
    conversation.wait_for()
    assert "You are a careful agent." in conversation.inner_text()

    # The buttons and the slider move the same cursor; reloading keeps the step.
    page.click("[data-replay=last]")
    page.wait_for_url(re.compile(r"\?step=8$"))
    page.locator("#replay-slider").evaluate(
        "el => { el.value = '5'; el.dispatchEvent(new Event('input', {bubbles: true})); }")
    page.wait_for_url(re.compile(r"\?step=5$"))
    page.reload()
    assert current_seq(page) == "5"
    assert page.locator("#step-5").is_visible()
    assert page.js_errors == []


def test_a_collapsed_payload_opens_on_demand(page, live_url, user):
    run = make_run(user)
    page.goto(f"{live_url}/runs/{run.pk}/")
    assert "END-OF-LONG-PAYLOAD" not in page.content()
    summary = page.locator("#step-6 details.lazy > summary", has_text="Observation")
    assert "5.0 KB" in summary.inner_text()
    summary.click()
    body = page.locator("#step-6 details.lazy[open] .payload-body")
    body.get_by_text("END-OF-LONG-PAYLOAD").wait_for()
    assert "Paris 21C sunny" in body.inner_text()
    assert page.js_errors == []


def test_the_replay_loads_a_big_run_up_to_the_step(page, live_url, user):
    run = big_run(user, 450)
    page.goto(f"{live_url}/runs/{run.pk}/?step=3")
    assert current_seq(page) == "3"
    assert page.locator("#step-201").count() == 0
    page.keyboard.press("End")
    page.wait_for_url(re.compile(r"\?step=450$"))
    page.locator("#step-450.current").wait_for()
    assert page.locator("#step-450").is_visible()  # scrolled into view
    assert page.locator(".step").count() == 450
    assert page.js_errors == []


def test_pick_two_runs_and_see_where_they_part(page, live_url, user):
    a = make_run(user)
    steps = demo_steps()
    steps[2] = {**steps[2], "text": "Rainy, 12 C"}
    b = make_run(user, steps, input="What is the weather in Paris, again?")
    page.goto(f"{live_url}/runs/")
    button = page.locator("#diff-button")
    assert button.is_disabled()
    page.check(f"input[name=run][value='{a.pk}']")
    page.check(f"input[name=run][value='{b.pk}']")
    assert button.is_enabled()
    button.click()
    page.wait_for_url(re.compile(r"/runs/diff/\?a=\d+&b=\d+$"))
    row = page.locator("#first-divergence")
    assert "first divergence" in row.inner_text() and "get_weather" in row.inner_text()
    assert row.locator("del").first.inner_text() == "Sunny"
    assert row.locator("ins").first.inner_text() == "Rainy"
    page.click("text=Jump to first divergence")
    page.wait_for_url(re.compile(r"#first-divergence$"))
    assert row.is_visible()
    assert page.js_errors == []


def test_the_filter_form_updates_the_table_in_place(page, live_url, user):
    make_run(user)
    make_run(user, [{"kind": "tool", "name": "calculator", "text": "42"}], input="What is 6*7?")
    page.goto(f"{live_url}/runs/")
    assert page.locator("#run-table tbody tr").count() == 2
    page.fill("input[name=q]", "calculator")
    page.wait_for_url(re.compile(r"q=calculator"))
    page.wait_for_function("document.querySelectorAll('#run-table tbody tr').length === 1")
    assert "What is 6*7?" in page.locator("#run-table").inner_text()
    assert page.js_errors == []
