"""An outside agent under the debugger, in real Chromium against daphne: a plain openai-SDK
tool loop (in a thread) calls its model through the gateway of a session opened with a
breakpoint; the run page shows the held call live, the person edits the tool result the agent
sent (or writes the model's reply), continues, and the agent gets the edited exchange. Model:
the scripted OpenAI-compatible server, which answers from the tool result it is sent."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.gateway_clients import QUESTION, agent_in_session, held_run, post

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_held_tool_result_is_edited_in_the_page_and_the_agent_gets_it(page, live_url, user,
                                                                         fake_llm):
    agent, token, session = agent_in_session(live_url, user, fake_llm,
                                             {"break_tools": ["get_weather"]})
    run = held_run(user)
    page.goto(f"{live_url}/runs/{run.pk}/")
    expect(page.locator("#gateway-note")).to_contain_text(
        "Its program called the model scripted through Agent Lab's gateway")
    pending = page.locator('[data-live="pending"]')
    expect(pending.locator('[data-live="pending-what"]')).to_have_text(
        "tool get_weather (step 2)")
    expect(pending).to_contain_text("breakpoint on the tool get_weather")
    expect(pending).to_contain_text("The agent ran this tool itself")
    result = pending.get_by_label("Tool result the agent sent")
    expect(result).to_have_value("sunny, 21 °C")  # what the agent sent, prefilled
    expect(pending.get_by_label("Pending input")).to_be_hidden()  # its arguments are done
    expiry = pending.locator('[data-live="hold-expiry"]')
    expect(expiry).to_contain_text(
        "s more before the gateway answers it with a timeout")
    first = int(expiry.inner_text().split("waits ")[1].split(" s")[0])
    expect(expiry).not_to_contain_text(f"waits {first} s more")  # it counts down
    assert agent.is_alive()  # held in the gateway, as the page says

    result.fill("hail and thunder")
    pending.get_by_role("button", name="Resume").click()

    assert agent.result() == "In Paris it is hail and thunder."
    assert fake_llm.requests[-1]["messages"][-1]["content"] == "hail and thunder"
    tool = page.locator('#steps > [data-seq="2"]')
    expect(tool).to_contain_text("hail and thunder")
    expect(pending).to_be_hidden()
    post(f"{live_url}/gateway/sessions/{session}/end", token, {"exit_code": 0})
    head = page.locator("#run-head")
    expect(head.locator(".answer-succeeded .text")).to_have_text(
        "In Paris it is hail and thunder.", timeout=20_000)
    assert page.js_errors == []


def test_hold_every_call_from_the_page_and_write_the_models_reply(page, live_url, user,
                                                                   fake_llm):
    agent, token, session = agent_in_session(live_url, user, fake_llm, {"break_kinds": ["llm"]})
    run = held_run(user)
    page.goto(f"{live_url}/runs/{run.pk}/")
    pending = page.locator('[data-live="pending"]')
    what = pending.locator('[data-live="pending-what"]')
    expect(what).to_have_text("llm scripted (step 1)")
    every_llm = page.get_by_label("Hold every LLM call")
    every_tool = page.get_by_label("Hold every tool result")
    expect(every_llm).to_be_checked()  # the session's breakpoints, as the run has them
    expect(every_tool).not_to_be_checked()
    request = pending.get_by_label("Pending input")
    assert QUESTION in json.loads(request.input_value())["messages"][1]["content"]

    every_llm.uncheck()
    every_tool.check()  # from the page: the agent's tool result is held next
    # (the debug frames and the resume go on one socket, in order)
    pending.get_by_role("button", name="Resume").click()
    expect(what).to_have_text("tool get_weather (step 2)")
    expect(pending).to_contain_text("breakpoint on every tool call")
    expect(pending.get_by_label("Tool result the agent sent")).to_have_value("sunny, 21 °C")

    every_llm.check()
    pending.get_by_role("button", name="Resume").click()
    expect(what).to_have_text("llm scripted (step 3)")
    pending.get_by_label("Write the response yourself").check()
    reply = pending.get_by_label("Response to the agent")
    expect(request).to_be_hidden()
    reply.fill("Foggy, says a person.")
    pending.get_by_role("button", name="Resume").click()

    assert agent.result() == "Foggy, says a person."
    assert len(fake_llm.requests) == 1  # the second call never reached the model
    expect(page.locator('#steps > [data-seq="3"]')).to_contain_text("Foggy, says a person.")
    post(f"{live_url}/gateway/sessions/{session}/end", token, {"exit_code": 0})
    expect(page.locator("#run-head .answer-succeeded .text")).to_have_text(
        "Foggy, says a person.", timeout=20_000)
    assert page.js_errors == []
