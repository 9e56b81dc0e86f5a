"""The step-by-step debugger in real Chromium: a run started in step mode pauses before each
LLM and tool call; the pending tool arguments are edited; the run goes on with them and the tool
step shows the edited arguments. Model: the scripted OpenAI-compatible server."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.browser_fixtures import run_once_in_step_mode
from tests.fake_openai import Reply

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_pause_in_step_mode_edit_a_tool_argument_and_continue(page, live_url, agent, fake_llm):
    fake_llm.script(Reply(tool_calls=[("calculator", '{"expression": "6*7"}')]),
                    Reply(text="The answer is 48."))
    pending = run_once_in_step_mode(page, live_url)

    what = pending.locator('[data-live="pending-what"]')
    expect(what).to_have_text("llm Scripted (step 1)")
    expect(pending).to_contain_text("step mode: before the llm call")
    expect(page.locator('[data-live="status"]')).to_have_text("paused")
    pending.get_by_role("button", name="Resume").click()

    expect(what).to_have_text("tool calculator (step 2)")
    editor = pending.get_by_label("Pending input")
    assert json.loads(editor.input_value()) == {"expression": "6*7"}
    editor.fill('{"expression": "6*8"}')
    page.get_by_label("Step mode: pause before every LLM call and tool call").uncheck()
    pending.get_by_role("button", name="Resume").click()

    tool = page.locator('.live-steps > [data-seq="2"]')
    expect(tool).to_contain_text("6*8")
    expect(tool).to_contain_text("48")
    expect(page.locator('[data-live="answer"]')).to_have_text("The answer is 48.")
    expect(page.locator('[data-live="status"]')).to_have_text("finished with an answer")
    expect(pending).to_be_hidden()
    assert fake_llm.requests[1]["messages"][-1]["content"].startswith("48")
    assert page.js_errors == []
