"""Cases from runs: "Add to suite" (one run from its page, many from the runs list) and LLM
steps saved as playground cases, opened again and sent to the scripted OpenAI-compatible
server through the real openai SDK."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from agentlab.evals.models import Case, PlaygroundCase, Suite
from agentlab.models import ModelProfile
from tests.factories import demo_steps, make_run, new_run
from tests.fake_openai import Reply
from traces.models import Run

pytestmark = pytest.mark.django_db

ADD = reverse("evals:add_runs")


def add(client, runs: list[Run], **fields) -> object:
    return client.post(ADD, {"run": [r.pk for r in runs], **fields})


def test_a_run_becomes_a_case_of_a_new_suite_from_its_page(client, user):
    client.force_login(user)
    run = make_run(user)
    page = client.get(reverse("run", args=[run.pk])).content.decode()
    assert "Add to suite…" in page and 'value="new"' in page  # no suite of alice's yet

    response = add(client, [run], suite="new", new_suite="Weather regressions",
                   tags="weather, paris, weather", back="run")
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    case = Case.objects.get()
    assert (case.suite.name, case.suite.owner, case.position) == ("Weather regressions", user, 1)
    assert case.question == "What is the weather in Paris?"
    assert case.expected == "It is sunny in Paris."  # its answer
    assert (case.scorer, case.tags, case.source_run) == ("contains", ["weather", "paris"], run)

    page = client.get(reverse("run", args=[run.pk])).content.decode()
    assert f"Run {run.pk} is now case #1 of “Weather regressions”." in page
    assert f'href="/evals/suites/{case.suite_id}/#case-{case.pk}">Weather regressions #1' in page
    suite_page = client.get(reverse("evals:suite", args=[case.suite_id])).content.decode()
    assert f'<a href="/runs/{run.pk}/">run {run.pk}</a>' in suite_page
    # the next time, the run page offers the suite it made
    assert f'<option value="{case.suite_id}">Weather regressions</option>' in page


def test_a_corrected_answer_is_the_expected_one(client, user):
    client.force_login(user)
    run = make_run(user)
    suite = Suite.objects.create(name="Mine", owner=user)
    response = add(client, [run], suite=suite.pk, scorer="exact",
                   **{f"expected-{run.pk}": "Rainy, 12 C\r\n"})
    assert response.status_code == 302 and response["Location"] == f"/evals/suites/{suite.pk}/"
    assert Case.objects.values_list("expected", "scorer").get() == ("Rainy, 12 C", "exact")


def test_many_runs_at_once_go_after_the_suites_cases_and_none_twice(client, user):
    client.force_login(user)
    suite = Suite.objects.create(name="Mine", owner=user)
    Case.objects.create(suite=suite, position=4, question="old", expected="x")
    first, second, third = (make_run(user, input=f"Question {i}?", final_answer=f"Answer {i}")
                            for i in range(3))
    assert add(client, [first], suite=suite.pk).status_code == 302
    form = client.get(ADD, {"run": [first.pk, second.pk, third.pk]})
    html = form.content.decode()
    assert form.status_code == 200 and "Add 3 runs to a suite" in html
    assert "Question 2?" in html and f'name="expected-{third.pk}"' in html and "Answer 2" in html

    response = add(client, [first, second, third], suite=suite.pk, tags="batch")
    assert response.status_code == 302
    cases = list(suite.cases.order_by("position").values_list("position", "question",
                                                               "source_run_id"))
    assert cases == [(4, "old", None), (5, "Question 0?", first.pk),
                     (6, "Question 1?", second.pk), (7, "Question 2?", third.pk)]
    said = client.get(reverse("evals:suite", args=[suite.pk])).content.decode()
    assert "Added 2 runs to “Mine” as cases #6–#7. Already there, not added again: " \
           f"run {first.pk} (case #5)." in said


def test_every_problem_is_said_and_nothing_is_written(client, user):
    client.force_login(user)
    words = make_run(user, final_answer="about forty")
    number = make_run(user, final_answer="It is 42.")
    running = new_run(user, status="running")
    response = add(client, [words, number], suite="new", new_suite="Numbers", scorer="numeric")
    html = response.content.decode()
    assert response.status_code == 400
    assert f"run {words.pk}: expected: numeric scorer: &#x27;about forty&#x27; is not a " \
           "number" in html
    assert f"run {number.pk}:" not in html
    assert 'value="Numbers"' in html and "about forty</textarea>" in html  # kept as typed
    response = add(client, [running], suite="new", new_suite="Numbers")
    assert f"run {running.pk} is still running: add it once it has finished" in \
        response.content.decode()
    failed = make_run(user, status="failed", final_answer="")
    response = add(client, [failed], suite="new", new_suite="Numbers")
    assert f"run {failed.pk}: expected: missing (the contains scorer needs it)" in \
        response.content.decode()
    assert add(client, [failed], suite="new", new_suite="").status_code == 400
    assert not Suite.objects.exists() and not Case.objects.exists()


def test_a_taken_name_is_refused(client, user):
    Suite.objects.create(name="Taken")
    client.force_login(user)
    response = add(client, [make_run(user)], suite="new", new_suite="  Taken ")
    assert response.status_code == 400
    assert "a suite named “Taken” already exists" in response.content.decode()
    assert not Case.objects.exists()


def test_the_runs_list_offers_add_to_suite(client, user):
    client.force_login(user)
    make_run(user)
    html = client.get(reverse("runs")).content.decode()
    assert 'id="suite-form"' in html and f'action="{ADD}"' in html and 'data-max="100"' in html


# -- playground cases ---------------------------------------------------------------------------

@pytest.fixture
def profile(fake_llm):
    return ModelProfile.objects.create(name="Scripted", base_url=fake_llm.base_url,
                                       model="scripted-model", retries=0)


def test_an_llm_step_offers_add_to_playground_cases(client, user, profile):
    client.force_login(user)
    run = make_run(user)  # step 2 is an llm call that asked for get_weather
    page = client.get(reverse("run", args=[run.pk])).content.decode()
    assert f'href="/runs/{run.pk}/steps/2/playground/?save=1#save-case"' in page
    html = client.get(f"/runs/{run.pk}/steps/2/playground/?save=1").content.decode()
    assert '<details class="pg-save" id="save-case" open>' in html
    assert 'get_weather({&quot;city&quot;: &quot;Paris&quot;})</textarea>' in html
    assert f'value="Run {run.pk} step 2: What is the weather in Paris?"' in html


@pytest.mark.django_db(transaction=True)
def test_a_saved_request_opens_in_the_playground_and_runs_again(client, user, profile,
                                                                 fake_llm):
    client.force_login(user)
    run = make_run(user)
    messages = demo_steps()[1]["input"]["messages"][:1] + [
        {"role": "user", "content": "What is the weather in Lyon?"}]  # edited before saving
    response = client.post(reverse("evals:playground_case_save", args=[run.pk, 2]), {
        "messages": json.dumps(messages), "params": '{"temperature": 0.3}',
        "profile": "Scripted", "case_name": "Lyon weather", "case_expected": "get_weather(Lyon)",
        "case_tags": "weather, lyon"})
    case = PlaygroundCase.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/evals/playground-cases/" \
                                                                   f"{case.pk}/"
    assert (case.user, case.name, case.messages, case.params) == (
        user, "Lyon weather", messages, {"temperature": 0.3})
    assert (case.expected, case.tags, case.source_run, case.source_seq) == (
        "get_weather(Lyon)", ["weather", "lyon"], run, 2)

    page = client.get(response["Location"]).content.decode()
    assert "Saved as the playground case “Lyon weather”." in page
    assert "What is the weather in Lyon?" in page and "get_weather(Lyon)</pre>" in page
    assert f'<a href="/runs/{run.pk}/?step=2">run {run.pk}, step 2</a>' in page

    fake_llm.script(Reply(text="It is raining in Lyon.", usage=(30, 6)))
    again = client.post(response["Location"], {"messages": json.dumps(messages),
                                                "params": '{"temperature": 0.3}',
                                                "profile": "Scripted"})
    html = again.content.decode()
    assert again.status_code == 200 and "It is raining in Lyon." in html
    assert "get_weather(Lyon)</pre>" in html  # the expected reply beside the new one
    assert fake_llm.last_request["messages"][-1]["content"] == "What is the weather in Lyon?"
    assert fake_llm.last_request["temperature"] == 0.3
    assert Run.objects.count() == 1  # nothing recorded

    listing = client.get(reverse("evals:playground_cases")).content.decode()
    assert f'href="/evals/playground-cases/{case.pk}/">Lyon weather</a>' in listing
    found = client.get(reverse("evals:playground_cases"), {"q": "lyon"}).content.decode()
    assert "Lyon weather</a>" in found
    missed = client.get(reverse("evals:playground_cases"), {"q": "paris"}).content.decode()
    assert "No playground case matches “paris”." in missed
    gone = client.post(reverse("evals:playground_case_delete", args=[case.pk]))
    assert gone.status_code == 302 and not PlaygroundCase.objects.exists()


def test_a_bad_request_is_not_saved_and_the_page_keeps_it(client, user, profile):
    client.force_login(user)
    run = make_run(user)
    response = client.post(reverse("evals:playground_case_save", args=[run.pk, 2]), {
        "messages": "[{oops", "params": "{}", "profile": "Scripted", "case_name": "Broken",
        "case_expected": "x" * 20_001})
    html = response.content.decode()
    assert response.status_code == 400 and "messages: not valid JSON" in html
    assert "expected reply: 20,001 characters, over the limit of 20,000" in html
    assert 'value="Broken"' in html and "[{oops" in html
    assert not PlaygroundCase.objects.exists()
    # only llm steps: step 3 is a tool call
    assert client.post(reverse("evals:playground_case_save", args=[run.pk, 3]), {
        "messages": "[]"}).status_code == 404
