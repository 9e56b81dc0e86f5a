"""A three-paradigm comparison in real Chromium (Playwright, Debian's /usr/bin/chromium) against
daphne: the form, three live columns, then the summary table, the chart and the diff links.

The model is the scripted OpenAI-compatible server (tests/fake_openai.py). The three runs call
it concurrently, so a queue of replies would be shared out at random: each agent has its own
model profile (its own model name) and a responder answers by model name and conversation."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from agentlab.models import Agent, ModelProfile, Tool
from tests.fake_openai import Reply

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PARADIGMS = {  # agent name -> (paradigm, params), in the form's order (by paradigm)
    "ReAct calc": ("react", {"mode": "function_calling"}),
    "ReWOO calc": ("rewoo", {}),
    "Self-Ask calc": ("self_ask", {"answerer": "llm"}),
}


def respond(body: dict) -> Reply:
    texts = " ".join(str(m.get("content") or "") for m in body["messages"])
    model = body["model"]
    if model == "react":
        if any(m["role"] == "tool" for m in body["messages"]):
            return Reply(text="Six times seven is 42.", usage=(60, 9), chunk_delay_s=0.02)
        return Reply(tool_calls=[("calculator", '{"expression": "6*7"}')], usage=(40, 12))
    if model == "self_ask":
        return Reply(text="Are follow up questions needed here: No.\n"
                          "So the final answer is: 42", usage=(30, 14))
    if "A plan was made for this task" in texts:  # ReWOO's solver, after the plan ran
        return Reply(text="42", usage=(80, 2))
    return Reply(text="Plan: multiply\n#E1 = calculator[6*7]", usage=(90, 11))


@pytest.fixture
def agents(fake_llm):
    fake_llm.responder = respond
    calculator = Tool.objects.filter(name="calculator")
    made = []
    for name, (paradigm, params) in PARADIGMS.items():
        profile = ModelProfile.objects.create(name=f"Scripted {paradigm}", model=paradigm,
                                              base_url=fake_llm.base_url, retries=0,
                                              price_in_per_m=1, price_out_per_m=2)
        agent = Agent(name=name, paradigm=paradigm, model_profile=profile, params=params)
        agent.full_clean()
        agent.save()
        agent.tools.set(calculator)
        made.append(agent)
    return made


def test_three_paradigms_race_to_a_summary_table(page, live_server_url, agents):
    page.goto(f"{live_server_url}/compare/")
    page.get_by_label("Question").fill("What is 6*7?")
    page.get_by_role("button", name="Run the comparison").click()
    expect(page.locator('[data-field="agents"]')).to_contain_text("Choose 2 to 6 agents")

    for name in PARADIGMS:
        page.get_by_label(re.compile(re.escape(name))).check()
    page.get_by_role("button", name="Run the comparison").click()
    page.wait_for_url(re.compile(r"/compare/\d+/$"))

    columns = page.locator(".compare-col")
    expect(columns).to_have_count(3)
    for i, name in enumerate(PARADIGMS):
        col = columns.nth(i)
        expect(col.get_by_role("link", name=name)).to_be_visible()
        expect(col.locator('[data-live="status"]')).to_have_text("finished with an answer",
                                                                 timeout=30_000)
        expect(col.locator('[data-live="steps"] [data-kind="final"]')).to_have_count(1)
    expect(columns.nth(0).locator('[data-live="answer"]')).to_have_text("Six times seven is 42.")
    expect(columns.nth(0).locator('[data-live="steps"] [data-kind="tool"]')).to_contain_text(
        "calculator")

    table = page.locator("table.compare-summary")
    expect(table).to_be_visible(timeout=10_000)  # refreshed once every column finished
    rows = table.locator("tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.nth(2)).to_contain_text("Self-Ask calc")
    expect(rows.nth(2)).to_contain_text("42")
    # Self-Ask answers in one call: the fewest LLM calls, so that cell is the marked one.
    expect(rows.nth(2).locator('td.best[data-col="llm_calls"]')).to_have_count(1)
    expect(rows.nth(0).locator('td.best[data-col="llm_calls"]')).to_have_count(0)
    expect(table.locator('td.best[data-col="wall_ms"]')).to_have_count(1)
    expect(page.locator("#compare-chart[data-drawn]")).to_have_count(1)
    expect(page.get_by_role("link", name=re.compile("↔"))).to_have_count(3)
    assert page.js_errors == []

    page.reload()  # opened after the runs finished: all rendered by the server
    expect(page.locator("table.compare-summary tbody tr")).to_have_count(3)
    expect(page.locator(".compare-col").nth(1).locator('[data-live="answer"]')).to_have_text("42")
    assert page.js_errors == []
