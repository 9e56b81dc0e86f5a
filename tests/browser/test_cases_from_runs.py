"""Cases from runs in real Chromium: a run added to a new suite from its page with a corrected
answer, then several ticked in the runs list added to that suite at once; an LLM step saved as
a playground case from its link."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from agentlab.evals.models import Case, PlaygroundCase, Suite
from tests.factories import make_run

pytestmark = [pytest.mark.browser]


def test_runs_become_cases_from_a_run_page_and_from_the_runs_list(page, live_url, user):
    wrong = make_run(user, input="What is the capital of Australia?", final_answer="Sydney")
    others = [make_run(user, input=f"What is {n}*{n}?", final_answer=f"It is {n * n}.")
              for n in (3, 4, 5)]

    # One run, from its page: a new suite, the wrong answer corrected.
    page.goto(f"{live_url}/runs/{wrong.pk}/")
    page.get_by_text("Add to suite…").click()
    form = page.locator("#add-to-suite form")
    expect(form.get_by_label("Expected answer")).to_have_value("Sydney")
    expect(form.get_by_label("New suite's name")).to_be_visible()  # no suite of hers yet
    form.get_by_label("New suite's name").fill("Answers people corrected")
    form.get_by_label("Expected answer").fill("Canberra")
    form.get_by_label("Tags").fill("geography, corrected")
    form.get_by_role("button", name="Add to suite").click()
    page.wait_for_url(f"{live_url}/runs/{wrong.pk}/")
    expect(page.locator("ul.messages")).to_contain_text(
        f"Run {wrong.pk} is now case #1 of “Answers people corrected”.")
    expect(page.locator("#cases-from-run")).to_contain_text("Answers people corrected #1")
    suite = Suite.objects.get()
    case = Case.objects.get()
    assert (case.question, case.expected, case.tags, case.source_run_id, suite.owner_id) == (
        "What is the capital of Australia?", "Canberra", ["geography", "corrected"], wrong.pk,
        user.pk)

    # Several, from the runs list: tick three, "Add 3 to suite…", into the suite just made.
    page.goto(f"{live_url}/runs/")
    button = page.locator("#suite-button")
    expect(button).to_be_disabled()
    for run in others:
        page.get_by_label(f"Select run {run.pk}", exact=True).check()
    expect(button).to_have_text("Add 3 to suite…")
    button.click()
    page.wait_for_url(re.compile(r"/evals/cases/from-runs/\?run="))
    expect(page.locator("h1")).to_have_text("Add 3 runs to a suite")
    expect(page.locator("select[name=suite]")).to_have_value(str(suite.pk))
    expect(page.get_by_label("New suite's name")).to_be_hidden()  # an existing one is chosen
    page.get_by_label("Scorer").select_option("numeric")
    page.get_by_role("button", name="Add 3 cases").click()
    page.wait_for_url(f"{live_url}/evals/suites/{suite.pk}/")
    expect(page.locator("ul.messages")).to_contain_text(
        "Added 3 runs to “Answers people corrected” as cases #2–#4.")
    rows = page.locator("table.evals-cases tbody tr")  # in the list's order: newest first
    expect(rows).to_have_count(4)
    expect(rows.nth(1)).to_contain_text("What is 5*5?")
    expect(rows.nth(3)).to_contain_text("What is 3*3?")
    assert list(suite.cases.order_by("position").values_list("expected", "scorer"))[1:] == [
        ("It is 25.", "numeric"), ("It is 16.", "numeric"), ("It is 9.", "numeric")]

    # The case's link goes back to its run, whose page names the suite.
    rows.nth(3).get_by_role("link", name=f"run {others[0].pk}").click()
    expect(page.locator("#cases-from-run")).to_contain_text("Answers people corrected #4")
    assert page.js_errors == []


def test_an_llm_step_becomes_a_playground_case(page, live_url, user):
    run = make_run(user)  # step 2: an llm call that asked for get_weather
    page.goto(f"{live_url}/runs/{run.pk}/")
    page.locator("#step-2").get_by_role("link", name="Add to playground cases").click()
    save = page.locator("#save-case")
    expect(save).to_have_attribute("open", "")
    expect(save.get_by_label("Expected reply")).to_have_value('get_weather({"city": "Paris"})')
    save.get_by_label("Name").fill("Paris weather call")
    save.get_by_label("Tags").fill("weather")
    save.get_by_role("button", name="Save as a playground case").click()
    page.wait_for_url(re.compile(r"/evals/playground-cases/\d+/$"))
    expect(page.locator("h1")).to_contain_text("Paris weather call")
    expect(page.locator("#expected-reply pre")).to_have_text('get_weather({"city": "Paris"})')
    expect(page.get_by_label("Messages (JSON list)")).to_contain_text("You are a careful agent.")
    case = PlaygroundCase.objects.get()
    assert (case.name, case.source_seq, case.tags) == ("Paris weather call", 2, ["weather"])
    page.goto(f"{live_url}/evals/playground-cases/")
    expect(page.get_by_role("link", name="Paris weather call")).to_be_visible()
    assert page.js_errors == []
