"""The evaluation pages: the start form, one experiment's matrix and summary, cancel, re-run,
the comparison with an earlier experiment, permissions.

Experiments that must execute run on the scripted OpenAI-compatible server
(tests/fake_openai.py); finished experiments for rendering tests are written directly as result
and run rows with known figures, so every expected number below is computed by hand."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from agentlab.evals import estimates, runner
from agentlab.evals.models import Case, Experiment, Result, Suite
from agentlab.evals.summary import matrix
from agentlab.models import Agent, ModelProfile
from tests.fake_openai import Delay, Reply
from tests.waiting import await_until
from traces.models import Run, Step

pytestmark = pytest.mark.django_db(transaction=True)

CASES = [("What is 2+2?", "4", ["sums"]), ("What is 3+1?", "4", ["sums"]),
         ("What is 3*3?", "9", ["products"])]


async def experiment_done(pk: int) -> None:
    """Wait for an experiment's task while it runs; a fast one may have ended already."""
    if (task := runner.EXPERIMENTS.task(pk)) is not None:
        await asyncio.wait_for(task, 30)
    assert (await Experiment.objects.aget(pk=pk)).status not in ("queued", "running")


@pytest.fixture
def suite():
    s = Suite.objects.create(name="Arithmetic", description="Three small sums.")
    for pos, (question, expected, tags) in enumerate(CASES, start=1):
        Case.objects.create(suite=s, position=pos, question=question, expected=expected,
                            scorer="contains", tags=tags)
    return s


@pytest.fixture
def agents(fake_llm):
    profile = ModelProfile.objects.create(name="Scripted", base_url=fake_llm.base_url,
                                          model="scripted-model", retries=0)
    made = []
    for name in ("Alpha", "Beta"):
        agent = Agent(name=name, paradigm="react", model_profile=profile,
                      params={"mode": "function_calling"})
        agent.full_clean()
        agent.save()
        made.append(agent)
    return made


def finished(user, suite, agents, grid, status="succeeded"):
    """An experiment whose result for case i × agent j (agents by name) has score grid[i][j]
    (None: the run failed, an error result); agent j's runs cost (j+1)·0.001 $, take (j+1) s
    and use 100·(j+1)+10 tokens each."""
    experiment = runner.create_experiment(user, suite, agents)
    _cases, _columns, cells = matrix(experiment)
    for i, row in enumerate(cells):
        for j, r in enumerate(row):
            score = grid[i][j]
            run = Run.objects.create(
                user=user, agent=r.agent, agent_name=r.agent_name, paradigm="react",
                input=r.case.question, status="failed" if score is None else "succeeded",
                tokens_in=100 * (j + 1), tokens_out=10, cost_usd=0.001 * (j + 1),
                wall_ms=1000.0 * (j + 1), final_answer="" if score is None else "an answer")
            Result.objects.filter(pk=r.pk).update(
                run=run, status="error" if score is None else "done", score=score,
                passed=None if score is None else score == 1, finished_at=timezone.now(),
                error="the run failed: boom" if score is None else "")
    Experiment.objects.filter(pk=experiment.pk).update(status=status, finished_at=timezone.now())
    return Experiment.objects.get(pk=experiment.pk)


def cells_of(html):
    """(classes, text) of every matrix cell, row by row."""
    return [(m.group(1), " ".join(re.sub(r"<[^>]+>", "", m.group(2)).split()))
            for m in re.finditer(r'<td class="cell ([^"]+)"[^>]*>(.*?)</td>', html, re.S)]


def errors(html, field):
    return re.findall(rf'data-field="{field}">([^<]+)<', html)


# -- the start form ------------------------------------------------------------------------


@pytest.mark.parametrize(("data", "field", "message"), [
    ({}, "agents", "Choose at least one agent."),
    ({"concurrency": "0"}, "concurrency", "Concurrency is 1 to 8."),
    ({"concurrency": "9"}, "concurrency", "Concurrency is 1 to 8."),
    ({"case_limit": "0"}, "case_limit", "Run at least one case (or leave it blank)."),
    ({"run_timeout_s": "0"}, "run_timeout_s", "Give each run at least 1 s (or leave it blank)."),
    ({"case_tags": "weather, sql"}, "case_tags",
     "No case of “Arithmetic” is tagged weather or sql; its tags: products, sums."),
])
def test_invalid_starts_are_refused_with_the_reason(client, user, suite, agents, data, field,
                                                    message):
    client.force_login(user)
    post = {"suite": suite.pk, "agents": [a.pk for a in agents], "concurrency": "2", **data}
    if field == "agents":
        post.pop("agents")
    html = client.post("/evals/", post).content.decode()
    assert errors(html, field) == [message]
    assert not Experiment.objects.exists() and not Run.objects.exists()


def test_a_suite_without_cases_or_a_judge_less_llm_judge_suite_is_refused(client, user, suite,
                                                                          agents):
    client.force_login(user)
    empty = Suite.objects.create(name="Empty")
    html = client.post("/evals/", {"suite": empty.pk, "agents": [agents[0].pk],
                                   "concurrency": "1"}).content.decode()
    assert errors(html, "suite") == ["The suite “Empty” has no cases yet."]
    Case.objects.create(suite=suite, position=4, question="Explain 2+2.", scorer="llm_judge",
                        rubric="Says four.")
    html = client.post("/evals/", {"suite": suite.pk, "agents": [agents[0].pk],
                                   "concurrency": "1"}).content.decode()
    assert errors(html, "__all__") == [
        "Cannot start: 1 case(s) use the LLM judge: choose a judge profile."]
    assert not Experiment.objects.exists() and not Result.objects.exists()


async def test_starting_runs_every_pair_and_the_page_shows_them_scored(async_client, user, suite,
                                                                       agents, fake_llm):
    fake_llm.responder = lambda body: Reply(text="It is 4.", usage=(20, 5))
    await async_client.aforce_login(user)
    resp = await async_client.post("/evals/", {"suite": suite.pk,
                                               "agents": [a.pk for a in agents],
                                               "concurrency": "2", "title": "First try"})
    experiment = await Experiment.objects.aget()
    assert resp.status_code == 302 and resp["Location"] == f"/evals/experiments/{experiment.pk}/"
    assert experiment.concurrency == 2 and experiment.title == "First try"
    # The experiment is a task of this loop, started before the redirect came back (with an
    # instant model it may even be over already).
    await experiment_done(experiment.pk)

    html = (await async_client.get(resp["Location"])).content.decode()
    assert "6 / 6 · 100%" in html and 'value="6"' in html
    assert 'hx-trigger="every' not in html  # finished: no more polling
    cells = cells_of(html)
    assert [c for c, _ in cells] == ["cell-pass", "cell-pass"] * 2 + ["cell-fail"] * 2
    assert cells[0][1] == "✓ 100%" and cells[-1][1] == "✗ 0%"
    run_ids = [r.run_id async for r in Result.objects.order_by("case__position", "agent_name")]
    assert all(f'href="/runs/{pk}/"' in html for pk in run_ids)
    assert 'id="evals-chart-data"' in html
    # Each agent: 2 of 3 passed.
    assert html.count('data-col="pass_rate">67%') == 2


def test_an_oversized_tag_list_from_an_ordinary_account_is_refused(client, other_user, suite,
                                                                    agents):
    # 400 characters at most: two hundred one-letter tags, not an unbounded list.
    client.force_login(other_user)
    html = client.post("/evals/", {"suite": suite.pk, "agents": [agents[0].pk],
                                   "concurrency": "1", "case_tags": "s," * 201}).content.decode()
    assert errors(html, "case_tags") == [
        "Ensure this value has at most 400 characters (it has 402)."]
    assert not Experiment.objects.exists()


def test_a_start_with_tags_makes_an_experiment_of_those_cases(client, user, suite, agents):
    client.force_login(user)
    page = client.get("/evals/").content.decode()
    # What the form's estimate counts from: each case's tags, per suite.
    assert f'"case_tags": {{"{suite.pk}": [["sums"], ["sums"], ["products"]]}}' in page
    response = client.post("/evals/", {"suite": suite.pk, "agents": [agents[0].pk],
                                       "concurrency": "1", "case_tags": " products ,"})
    experiment = Experiment.objects.get()
    assert response.status_code == 302 and experiment.case_tags == ["products"]
    assert [r.case.question for r in experiment.results.all()] == ["What is 3*3?"]
    assert "cases tagged products" in client.get(response.url).content.decode()


async def test_the_one_click_form_starts_the_demo_suite_on_one_agent_per_paradigm(
        async_client, user):
    from agentlab.defaults import DEFAULT_AGENTS, load_defaults
    from agentlab.evals.demo import DEMO_SUITE, load_demo_suite

    await sync_to_async(load_defaults)()
    demo = await sync_to_async(load_demo_suite)()
    await async_client.aforce_login(user)
    html = (await async_client.get("/evals/")).content.decode()
    form = html[html.index('class="evals-oneclick"'):]
    form = form[:form.index("</form>")]
    ids = [int(i) for i in re.findall(r'name="agents" value="(\d+)"', form)]
    names = [a.name async for a in Agent.objects.filter(pk__in=ids).order_by("pk")]
    paradigms = {d.paradigm for d in DEFAULT_AGENTS}
    assert len(ids) == len(paradigms) == 7
    assert "ReAct (function calling)" in names and "ReAct (text)" not in names
    assert f'name="suite" value="{demo.pk}"' in form and f"“{DEMO_SUITE}”" in form
    # The first offer is a small experiment: three cases, not the whole suite.
    assert 'name="case_limit" value="3"' in form and "3 cases × 7 agents = 21 runs" in form


# -- one experiment ------------------------------------------------------------------------


def test_the_matrix_and_summary_render_with_the_best_marked(client, user, suite, agents):
    e = finished(user, suite, agents, [[1.0, 1.0], [0.5, 1.0], [0.0, None]])
    client.force_login(user)
    html = client.get(f"/evals/experiments/{e.pk}/").content.decode()
    assert [c for c, _ in cells_of(html)] == ["cell-pass", "cell-pass", "cell-partial",
                                              "cell-pass", "cell-fail", "cell-error"]
    assert [t for _, t in cells_of(html)][:3] == ["✓ 100%", "✓ 100%", "✗ 50%"]
    assert html.count('name="run" value=') == 6 and 'action="/runs/diff/"' in html
    rows = dict(re.findall(r'<tr data-agent="(\w+)">(.*?)</tr>', html, re.S))
    # Alpha: (1 + .5 + 0) / 3 = 50 %, 1 of 3 passed; Beta: (1 + 1 + 0) / 3 = 67 %, 2 of 3.
    assert 'data-col="mean_score">50%' in rows["Alpha"]
    assert 'class="num best" data-col="mean_score">67%' in rows["Beta"]
    assert 'data-col="pass_rate">33%' in rows["Alpha"]
    assert 'class="num best" data-col="pass_rate">67%' in rows["Beta"]
    assert "(1 error)" in rows["Beta"] and "3 / 3" in rows["Beta"]
    # Alpha's runs are the cheaper ones: 3 × 110 tokens, 3 × $0.001, 3 × 1 s.
    assert 'class="num best" data-col="tokens">330' in rows["Alpha"]
    assert 'class="num best" data-col="cost_usd">$0.003<' in rows["Alpha"]
    assert 'class="num best" data-col="wall_s">3.0 s' in rows["Alpha"]
    assert "best" not in rows["Beta"].replace('best" data-col="mean_score', "").replace(
        'best" data-col="pass_rate', "")
    assert 'id="evals-chart-data"' in html and "Re-run" in html and ">Cancel<" not in html


def test_the_estimate_counts_runs_taking_turns_on_the_model_they_share(client, user, agents,
                                                                       fake_llm, settings):
    """Issue 38: two runs at a time on a model that answers one request at a time are not twice
    as fast: the model's part of their time goes one run after the other."""
    settings.AGENTLAB_MODEL_CONCURRENCY = 1  # the scripted endpoint, like the embedded model
    for agent in agents:  # two past runs each: 10 s, 9 of them the model's
        for _ in range(2):
            run = Run.objects.create(user=user, agent=agent, agent_name=agent.name, input="q",
                                     status="succeeded", wall_ms=10_000)
            Step.objects.create(run=run, seq=1, kind="llm", started_at=timezone.now(),
                                duration_ms=9_000)
    # 4 cases × 2 agents: 80 s of runs, 2 at a time, would be 40 s; but 72 s of it is the
    # model's, one request at a time.
    got = estimates.for_agents(user, agents, 4, 2)
    assert got["runs"] == 8 and got["seconds"] == pytest.approx(72)
    assert "take turns on the model they share" in got["text"]
    # The start form's script gets the same figures (static/agentlab/evals.js).
    client.force_login(user)
    html = client.get("/evals/").content.decode()
    data = json.loads(re.search(r'id="evals-estimate-data"[^>]*>(.*?)</script>', html,
                                re.S).group(1))
    pk = str(agents[0].pk)
    assert data["seconds"][pk] == pytest.approx(10)
    assert data["model_seconds"][pk] == pytest.approx(9)
    assert data["models"][pk] == [fake_llm.base_url, 1]
    # A model that takes both at once: the runs' time over the concurrency, as before.
    settings.AGENTLAB_MODEL_CONCURRENCY = 0
    got = estimates.for_agents(user, agents, 4, 2)
    assert got["seconds"] == pytest.approx(40) and "take turns" not in got["text"]


def test_a_model_busy_result_is_shown_as_such_and_left_out_of_the_scores(client, user, suite,
                                                                         agents):
    """Issue 38: a case whose run timed out waiting for a busy model is marked "model busy" in
    the matrix and the summary, and counts in neither the mean score nor the pass rate (here
    or in the experiments list)."""
    e = finished(user, suite, agents, [[1.0, 1.0], [0.0, 1.0], [None, 1.0]])
    busy = e.results.get(case__position=3, agent_name="Alpha")
    Run.objects.filter(pk=busy.run_id).update(status="timed_out")
    Result.objects.filter(pk=busy.pk).update(
        error="the model was busy: the run waited 3.0 s of its 4.0 s for other runs' calls, "
              "then the run timed out. Not counted against the agent.",
        scorer_detail={"model_busy": True, "waited_ms": 3000, "wall_ms": 4000})
    client.force_login(user)
    html = client.get(f"/evals/experiments/{e.pk}/").content.decode()
    assert cells_of(html)[4] == ("cell-busy", "model busy")
    rows = dict(re.findall(r'<tr data-agent="(\w+)">(.*?)</tr>', html, re.S))
    # Alpha: 1 and 0 over the 2 scored (the busy one is not a 0): 50 %, 1 of 2 passed.
    assert 'data-col="mean_score">50%' in rows["Alpha"]
    assert 'data-col="pass_rate">50%' in rows["Alpha"]
    assert "2 / 3" in rows["Alpha"] and "(1 model busy)" in rows["Alpha"]
    assert "error" not in rows["Alpha"]
    # The experiment's own score: (1 + 1 + 0 + 1 + 1) / 5 = 80 %.
    assert "scored 80%" in html
    listed = client.get("/evals/").content.decode()
    assert "scored 80%" in re.search(r'<tr data-experiment="\d+">(.*?)</tr>', listed,
                                     re.S).group(1)


def test_while_it_runs_the_fragment_polls_and_shows_the_progress(client, user, suite, agents):
    e = runner.create_experiment(user, suite, agents)
    first = e.results.order_by("case__position", "agent_name").first()
    Result.objects.filter(pk=first.pk).update(status="done", score=1.0, passed=True)
    Experiment.objects.filter(pk=e.pk).update(status="running")
    client.force_login(user)
    html = client.get(f"/evals/experiments/{e.pk}/live/").content.decode()
    assert f'hx-get="/evals/experiments/{e.pk}/live/"' in html and 'hx-trigger="every 1s"' in html
    assert "1 / 6 · 17%" in html and ">Cancel<" in html and "<!doctype" not in html
    assert [c for c, _ in cells_of(html)] == ["cell-pass"] + ["cell-pending"] * 5
    assert "evals-chart-data" not in html  # the chart comes with the end
    Experiment.objects.filter(pk=e.pk).update(status="succeeded")
    Result.objects.update(status="done", score=0.0, passed=False)
    html = client.get(f"/evals/experiments/{e.pk}/live/").content.decode()
    assert "hx-get" not in html and "6 / 6 · 100%" in html


def test_cancel_keeps_the_finished_results(client, user, suite, agents):
    e = runner.create_experiment(user, suite, agents)
    kept = e.results.order_by("case__position", "agent_name").first()
    Result.objects.filter(pk=kept.pk).update(status="done", score=1.0, passed=True)
    client.force_login(user)
    resp = client.post(f"/evals/experiments/{e.pk}/cancel/", follow=True)
    html = resp.content.decode()
    assert "Experiment cancelled; the finished results are kept." in html
    e.refresh_from_db()
    assert e.status == "cancelled"
    assert list(e.results.values_list("status", flat=True).order_by("case__position",
                                                                    "agent_name")) == [
        "done"] + ["cancelled"] * 5
    assert [c for c, _ in cells_of(html)] == ["cell-pass"] + ["cell-cancelled"] * 5
    again = client.post(f"/evals/experiments/{e.pk}/cancel/", follow=True).content.decode()
    assert "The experiment had already finished." in again


async def test_cancelling_a_running_experiment_stops_the_rest(async_client, user, suite, agents,
                                                              fake_llm):
    fake_llm.responder = lambda body: Delay(0.4, Reply(text="It is 4."))
    await async_client.aforce_login(user)
    await async_client.post("/evals/", {"suite": suite.pk, "agents": [a.pk for a in agents],
                                        "concurrency": "1"})
    e = await Experiment.objects.aget()
    await await_until(lambda: e.results.filter(status="done").aexists(),
                      message="the first pair is done")
    resp = await async_client.post(f"/evals/experiments/{e.pk}/cancel/")
    assert resp.status_code == 302
    await asyncio.wait_for(runner.EXPERIMENTS.task(e.pk) or asyncio.sleep(0), 20)
    statuses = [s async for s in e.results.values_list("status", flat=True)]
    assert "done" in statuses and "cancelled" in statuses
    assert not {"pending", "running"} & set(statuses)


async def test_rerun_starts_a_new_experiment_compared_with_the_old(async_client, user, suite,
                                                                   agents, fake_llm):
    fake_llm.responder = lambda body: Reply(text="It is 4 or 9.")
    old = await sync_to_async(finished)(user, suite, agents, [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    await async_client.aforce_login(user)
    resp = await async_client.post(f"/evals/experiments/{old.pk}/rerun/")
    new = await Experiment.objects.exclude(pk=old.pk).aget()
    assert resp["Location"] == f"/evals/experiments/{new.pk}/" and new.previous_id == old.pk
    await experiment_done(new.pk)
    html = (await async_client.get(resp["Location"])).content.decode()
    assert f're-run of <a href="/evals/experiments/{old.pk}/">' in html
    assert f'<option value="{old.pk}" selected>' in html
    pick = await async_client.get(f"/evals/experiments/{new.pk}/compare/?other={old.pk}")
    assert pick["Location"] == f"/evals/experiments/{new.pk}/compare/{old.pk}/"
    # Everything passes now: the two pairs that scored 0 got better, the four others stayed.
    html = (await async_client.get(pick["Location"])).content.decode()
    assert 'data-count="better">2 better' in html and 'data-count="worse">0 worse' in html
    assert 'data-count="same">4 same' in html


# -- comparing -----------------------------------------------------------------------------


def test_the_comparison_counts_better_worse_and_same(client, user, suite, agents):
    before = finished(user, suite, agents, [[1.0, 0.0], [0.5, 1.0], [None, 1.0]])
    after = finished(user, suite, agents, [[1.0, 1.0], [0.0, 1.0], [1.0, None]])
    client.force_login(user)
    html = client.get(f"/evals/experiments/{after.pk}/compare/{before.pk}/").content.decode()
    # better: case 1 Beta (0 -> 1), case 3 Alpha (error -> 1); worse: case 2 Alpha (.5 -> 0),
    # case 3 Beta (1 -> error); same: case 1 Alpha, case 2 Beta.
    assert re.findall(r'data-change="(\w+)"', html) == ["same", "better", "worse", "same",
                                                        "better", "worse"]
    assert 'data-count="better">2 better' in html and 'data-count="worse">2 worse' in html
    assert 'data-count="same">2 same' in html
    assert html.count("/runs/diff/?a=") == 6


def test_experiments_of_different_suites_cannot_be_compared(client, user, suite, agents):
    a = finished(user, suite, agents, [[1.0, 1.0]] * 3)
    other = Suite.objects.create(name="Other")
    Case.objects.create(suite=other, position=1, question="Hi?", expected="hi")
    b = runner.create_experiment(user, other, agents)
    client.force_login(user)
    assert client.get(f"/evals/experiments/{a.pk}/compare/{b.pk}/").status_code == 404
    assert client.get(f"/evals/experiments/{a.pk}/compare/{a.pk}/").status_code == 404


# -- the index and permissions ---------------------------------------------------------------


def test_the_index_lists_suites_with_counts_and_tags_and_experiments_with_scores(
        client, user, suite, agents):
    finished(user, suite, agents, [[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    client.force_login(user)
    html = client.get("/evals/").content.decode()
    row = re.search(rf'<tr data-suite="{suite.pk}">(.*?)</tr>', html, re.S).group(1)
    assert "Arithmetic" in row and "<td class=\"num\" data-cases>3</td>" in row
    assert re.findall(r'class="pill">(\w+)<', row) == ["products", "sums"]
    listed = re.search(r'<tr data-experiment="\d+">(.*?)</tr>', html, re.S).group(1)
    assert "6/6" in listed and '<td class="num">50%</td>' in listed and "scored 50%" in listed
    assert re.findall(r'<label class="check"><input[^>]*> ([^<]+)</label>', html) == [
        "Alpha (ReAct)", "Beta (ReAct)"]


def test_another_users_experiment_is_a_404_and_staff_see_all(client, user, other_user, staff,
                                                            suite, agents):
    theirs = finished(other_user, suite, agents, [[1.0, 1.0]] * 3)
    mine = finished(user, suite, agents, [[1.0, 1.0]] * 3)
    client.force_login(user)
    for url in (f"/evals/experiments/{theirs.pk}/", f"/evals/experiments/{theirs.pk}/live/",
                f"/evals/experiments/{theirs.pk}/compare/{mine.pk}/",
                f"/evals/experiments/{mine.pk}/compare/{theirs.pk}/"):
        assert client.get(url).status_code == 404, url
    for url in (f"/evals/experiments/{theirs.pk}/cancel/",
                f"/evals/experiments/{theirs.pk}/rerun/"):
        assert client.post(url).status_code == 404, url
    assert f'data-experiment="{theirs.pk}"' not in client.get("/evals/").content.decode()
    assert f'<option value="{theirs.pk}"' not in client.get(
        f"/evals/experiments/{mine.pk}/").content.decode()
    client.force_login(staff)
    assert f'data-experiment="{theirs.pk}"' in client.get("/evals/").content.decode()
    assert client.get(f"/evals/experiments/{theirs.pk}/").status_code == 200


def test_anonymous_users_are_sent_to_log_in(client):
    resp = client.get("/evals/")
    assert resp.status_code == 302 and resp["Location"].startswith("/login/")
