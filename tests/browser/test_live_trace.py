"""A trace page opened while its run is live, in real Chromium against daphne: what the run is
doing shows while it does it (the step, seconds ticking, tokens), the page becomes the finished
trace by itself when the run ends (header, totals, timeline, replay bar, ← →, no reload), and
step mode's checkbox says what the run really does after a reload. Model: the scripted
OpenAI-compatible server."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from agentlab.runs.snapshot import create_run
from tests.browser_fixtures import run_once_in_step_mode
from tests.fake_openai import Reply

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_live_page_becomes_the_finished_trace_without_a_reload(page, live_url, agent,
                                                                    user, fake_llm):
    fake_llm.script(Reply(tool_calls=[("calculator", '{"expression": "6*7"}')]),
                    Reply(text="Six times seven is 42.", chunk_delay_s=0.05))
    run = create_run(agent, user, "What is 6*7?")
    page.goto(f"{live_url}/runs/{run.pk}/")
    page.evaluate("window.notReloaded = true")
    head = page.locator("#run-head")
    expect(head.locator(".run-meta .status")).to_have_text("queued")
    expect(page.locator("#trace")).to_contain_text("No steps yet")
    page.get_by_role("button", name="Start").click()

    # The end: the header, totals, timeline and replay bar are the finished trace's.
    expect(head.locator(".run-meta .status")).to_have_text("finished with an answer",
                                                           timeout=20_000)
    expect(head.locator(".answer .text")).to_have_text("Six times seven is 42.")
    expect(head.locator(".totals")).to_contain_text("Steps4")
    expect(head.locator(".totals")).to_contain_text("LLM calls2")
    expect(page.locator(".timeline .waterfall .bar")).to_have_count(4)
    expect(page.locator(".live-panel")).to_have_count(0)
    expect(page.locator("#trace .empty")).to_have_count(0)
    expect(page.locator("#replay-slider")).to_be_enabled()
    expect(page.get_by_role("button", name="Replay")).to_be_visible()
    page.keyboard.press("ArrowRight")
    page.wait_for_url(re.compile(r"\?step=1$"))
    page.keyboard.press("End")
    page.wait_for_url(re.compile(r"\?step=4$"))
    expect(page.locator("#replay-label")).to_have_text("step 4 / 4")
    expect(page.locator(".step.current")).to_have_attribute("data-seq", "4")
    page.keyboard.press("ArrowLeft")
    expect(page.locator(".step.current")).to_have_attribute("data-seq", "3")
    assert page.evaluate("window.notReloaded") is True
    assert page.js_errors == []


def test_a_slow_call_shows_the_step_the_seconds_and_the_tokens(page, live_url, agent,
                                                                user, fake_llm):
    fake_llm.script(Reply(text="The answer, slowly: " + "forty-two " * 12, chunk_delay_s=0.15))
    run = create_run(agent, user, "What is 6*7, slowly?")
    page.goto(f"{live_url}/runs/{run.pk}/")
    page.get_by_role("button", name="Start").click()
    activity = page.locator('[data-live="activity"]')
    expect(activity).to_contain_text("Step 1: model call to Scripted", timeout=10_000)
    expect(activity).to_contain_text("tokens so far")
    expect(activity).to_contain_text("tokens/s")
    first = int(re.search(r"· (\d+) s", activity.inner_text()).group(1))
    expect(activity).to_contain_text(re.compile(rf"· (?!{first} s)\d+ s"), timeout=3_000)  # ticks
    expect(page.locator("#run-head .run-meta .status")).to_have_text("finished with an answer",
                                                                     timeout=20_000)
    assert page.js_errors == []


def test_step_mode_after_a_reload_shows_the_run_as_it_is(page, live_url, agent, fake_llm):
    fake_llm.script(Reply(tool_calls=[("calculator", '{"expression": "6*7"}')]),
                    Reply(text="The answer is 42."))
    pending = run_once_in_step_mode(page, live_url)
    expect(pending).to_contain_text("step mode: before the llm call")

    page.goto(page.url.split("?")[0])  # the live page again, as a reload without ?step_mode
    box = page.get_by_label("Step mode: pause before every LLM call and tool call")
    expect(box).to_be_checked()
    expect(pending).to_be_visible()
    # Pause / Resume / Step once each: in the pending box, not again in the bar.
    expect(page.get_by_role("button", name="Resume", exact=True)).to_have_count(1)
    expect(page.locator('button[data-act="step"]:visible')).to_have_count(1)
    expect(page.locator('button[data-act="pause"]:visible')).to_have_count(0)
    page.locator("details.live-debug").evaluate("d => d.open = true")
    box.uncheck()  # now it really leaves step mode: Resume runs to the end
    pending.get_by_role("button", name="Resume").click()
    expect(page.locator('[data-live="answer"]')).to_have_text("The answer is 42.",
                                                              timeout=15_000)
    expect(page.locator('[data-live="status"]')).to_have_text("finished with an answer")
    expect(page.locator('button[data-act]:visible')).to_have_count(0)  # none once it ended
    assert page.js_errors == []
