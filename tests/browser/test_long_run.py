"""A long run in real Chromium: a link far into it opens around the step, the replay jumps to
the other end and back with one request each (never loading the steps between), "load earlier"
puts the page before, and a search's result takes the replay to the step found."""

from __future__ import annotations

import re

import pytest

from tests.factories import big_run

pytestmark = [pytest.mark.browser]


def test_jump_far_and_back_and_find_a_step(page, live_url, user):
    run = big_run(user, 3000)
    fetched = []
    page.on("request", lambda r: fetched.append(r.url) if "/steps/" in r.url else None)
    page.goto(f"{live_url}/runs/{run.pk}/?step=2500")
    page.locator("#step-2500.current").wait_for()
    assert page.locator("#step-2469").count() == 0 and page.locator("#step-2470").count() == 1
    assert page.locator("#replay-label").inner_text() == "step 2500 / 3000"
    page.keyboard.press("Home")
    page.wait_for_url(re.compile(r"\?step=1$"))
    page.locator("#step-1.current").wait_for()
    assert page.locator("#step-2500").count() == 0 and page.locator("#steps-before").count() == 0
    page.keyboard.press("End")
    page.locator("#step-3000.current").wait_for()
    assert page.locator(".step").count() <= 100  # a page around it, not the 2,800 between
    assert [u for u in fetched if "around=" in u] and not [u for u in fetched if "upto=" in u]
    page.get_by_role("button", name="Load earlier steps (before #2970)").click()
    page.locator("#step-2770").wait_for()
    assert page.locator("#steps-before").get_attribute("data-before") == "2770"
    page.get_by_label("Text to find in the run's steps").fill("thinking 1234")
    page.locator("#find-form").get_by_role("button", name="Find").click()
    page.locator("#find-results").get_by_text("#1234 thought").click()
    page.locator("#step-1234.current").wait_for()
    page.wait_for_url(re.compile(r"\?step=1234$"))
    assert page.locator("#step-1234").is_visible()
    assert page.js_errors == []

