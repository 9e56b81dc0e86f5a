"""An experiment in real Chromium (Playwright, Debian's /usr/bin/chromium) against daphne: start
it from the form, watch the progress bar and the result matrix fill, then the summary and chart;
tick two cells for their diff and click one for its trace.

The model is the scripted OpenAI-compatible server (tests/fake_openai.py). Every reply is
"It is 4." after a delay, with concurrency 1, so the six runs take a few seconds and the
page's once-a-second polling sees the experiment part-way: the two "3*3" cases fail."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from agentlab.evals.models import Case, Suite
from agentlab.models import Agent, ModelProfile
from tests.fake_openai import Delay, Reply

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CASES = [("What is 2+2?", "4"), ("What is 3+1?", "4"), ("What is 3*3?", "9")]
AGENTS = ("Alpha", "Beta")


@pytest.fixture
def suite_and_agents(fake_llm):
    fake_llm.responder = lambda body: Delay(0.8, Reply(text="It is 4.", usage=(20, 5)))
    suite = Suite.objects.create(name="Arithmetic", description="Three small sums.")
    for pos, (question, expected) in enumerate(CASES, start=1):
        Case.objects.create(suite=suite, position=pos, question=question, expected=expected,
                            scorer="contains", tags=["math"])
    profile = ModelProfile.objects.create(name="Scripted", base_url=fake_llm.base_url,
                                          model="scripted-model", retries=0)
    for name in AGENTS:
        agent = Agent(name=name, paradigm="react", model_profile=profile,
                      params={"mode": "function_calling"})
        agent.full_clean()
        agent.save()
    return suite


def test_an_experiment_fills_its_matrix_live(page, live_url, suite_and_agents):
    page.goto(f"{live_url}/evals/")
    expect(page.locator(f'tr[data-suite="{suite_and_agents.pk}"] [data-cases]')).to_have_text("3")
    page.select_option("select[name=suite]", label="Arithmetic")
    page.get_by_role("button", name="Start the experiment").click()
    expect(page.locator('[data-field="agents"]')).to_have_text("Choose at least one agent.")

    for name in AGENTS:
        page.get_by_label(f"{name} (ReAct)").check()
    expect(page.locator("[data-estimate]")).to_contain_text("3 cases × 2 agents = 6 runs")
    # The estimate counts only the cases with one of the tags asked for.
    page.get_by_label("Only cases tagged").fill("weather, math")
    expect(page.locator("[data-estimate]")).to_contain_text("3 cases × 2 agents = 6 runs")
    page.get_by_label("Only cases tagged").fill("weather")
    expect(page.locator("[data-estimate]")).to_have_text(
        "Choose a suite and agents to see how many runs that is.")
    page.get_by_label("Only cases tagged").fill("")
    page.get_by_label("Concurrency").fill("1")
    page.get_by_role("button", name="Start the experiment").click()
    page.wait_for_url(re.compile(r"/evals/experiments/\d+/$"))

    progress = page.locator("#experiment-progress")
    expect(progress).to_have_attribute("max", "6")
    # Part-way: some cells scored, others still waiting, and the bar in between.
    expect(progress).to_have_attribute("value", re.compile(r"^[1-5]$"), timeout=20_000)
    expect(page.locator("td.cell-pending, td.cell-running").first).to_be_visible()
    expect(page.locator("[data-progress-text]")).to_have_text("6 / 6 · 100%", timeout=30_000)
    expect(progress).to_have_attribute("value", "6")
    # The badge tells how it scored, not just that it ran: 4 of 6 answers were right.
    expect(page.locator("[data-experiment-status]")).to_have_text("scored 67%")

    matrix = page.locator("table.evals-matrix")
    expect(matrix.locator("td.cell-pass")).to_have_count(4)
    expect(matrix.locator("td.cell-fail")).to_have_count(2)
    expect(matrix.locator("tbody tr").nth(2).locator("td.cell-fail [data-score]")).to_have_text(
        ["0%", "0%"])
    summary = page.locator("table.evals-summary")
    expect(summary.locator('td[data-col="pass_rate"]')).to_have_text(["67%", "67%"])
    expect(page.locator("#evals-chart[data-drawn]")).to_have_count(1)
    expect(page.get_by_role("button", name="Cancel")).to_have_count(0)
    expect(page.get_by_role("button", name="Re-run")).to_be_visible()

    # Two ticked cells -> their diff; the button stays off for one.
    diff = page.locator("[data-diff-button]")
    boxes = matrix.locator('input[name="run"]')
    boxes.nth(0).check()
    expect(diff).to_be_disabled()
    boxes.nth(1).check()
    expect(diff).to_be_enabled()
    diff.click()
    page.wait_for_url(re.compile(r"/runs/diff/\?run=\d+&run=\d+$"))
    expect(page.locator("table.diff-rows").first).to_be_visible()

    page.go_back()
    matrix.locator("tbody tr").nth(2).locator("[data-cell-link]").first.click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    expect(page.locator("h1.question")).to_have_text("What is 3*3?")
    # Its status says it answered; the score next to it says the answer was wrong.
    expect(page.locator("#run-head .run-meta .status")).to_have_text("finished with an answer")
    expect(page.locator("#run-head .run-meta .score")).to_have_text("scored 0%")
    assert page.js_errors == []


def test_the_start_form_says_how_many_runs_and_how_long_before_it_starts(page, live_url, user,
                                                                         suite_and_agents):
    from traces.models import Run

    alpha = Agent.objects.get(name="Alpha")
    for _ in range(2):  # alpha's past runs took 30 s each
        Run.objects.create(user=user, agent=alpha, agent_name="Alpha", paradigm="react",
                           input="q", status="succeeded", wall_ms=30_000)
    page.goto(f"{live_url}/evals/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Evals")
    page.select_option("select[name=suite]", label="Arithmetic")
    page.get_by_label("Alpha (ReAct)").check()
    page.get_by_label("Concurrency").fill("1")
    estimate = page.locator("[data-estimate]")
    expect(estimate).to_have_text("3 cases × 1 agent = 3 runs, about 90 s "
                                  "(from these agents' past runs)")
    page.get_by_label("Concurrency").fill("3")
    expect(estimate).to_contain_text("= 3 runs, about 30 s")
    page.get_by_label("Beta (ReAct)").check()  # no past runs: at least that long
    expect(estimate).to_contain_text("= 6 runs, about 30 s or more")
    page.get_by_label("First N cases").fill("1")
    expect(estimate).to_contain_text("1 case × 2 agents = 2 runs")

    # A suite's cases can be read outside the admin.
    page.get_by_role("link", name="Arithmetic").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Arithmetic")
    expect(page.locator("table.evals-cases tbody tr")).to_have_count(3)
    expect(page.locator("table.evals-cases")).to_contain_text("What is 3*3?")
    expect(page.locator('table.evals-cases tr').nth(3)).to_contain_text("9")
    assert page.js_errors == []
