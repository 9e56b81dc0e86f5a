"""Experiments: orchestration (concurrency, failures, cancel, re-run) and the summary figures.

Runs talk to the scripted OpenAI-compatible server (tests/fake_openai.py): a `responder` answers
by the question, so the replies do not depend on the order in which concurrent runs ask. The
summary tests write finished results and runs as rows with known figures, computed by hand."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import threading
import time

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from agentlab.evals import runner
from agentlab.evals.models import Case, Experiment, Result, Suite
from agentlab.evals.summary import agent_summary, change_counts, compare, matrix
from agentlab.profiles import model_for, to_config
from agentlab.runs.registry import EXPERIMENTS
from tests.factories import make_agents, scripted_profile
from tests.fake_openai import AtOnce, Fail
from tests.waiting import await_until
from traces.models import Run
from traces.owners import process_id

with_db = pytest.mark.django_db(transaction=True)


def question_of(body):
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")


@pytest.fixture
def profile(fake_llm):
    return scripted_profile(fake_llm.base_url)


def make_suite(*cases, name="Arithmetic"):
    suite = Suite.objects.create(name=name)
    for pos, (question, expected, scorer) in enumerate(cases, 1):
        Case.objects.create(suite=suite, position=pos, question=question, expected=expected,
                            scorer=scorer)
    return suite


def results(experiment):
    return {(r.case.question, r.agent_name): r
            for r in Result.objects.filter(experiment=experiment).select_related("case", "run")}


@with_db
async def test_the_concurrency_limit_is_respected_and_every_pair_is_a_recorded_run(
        fake_llm, profile, user):
    fake_llm.responder = at_once = AtOnce(lambda body: "The answer is 4.", seconds=0.15)
    agents = await sync_to_async(make_agents)(profile, 2)
    suite = await sync_to_async(make_suite)(*[(f"What is {i} + {4 - i}?", "4", "numeric")
                                              for i in range(4)])
    experiment = await sync_to_async(runner.create_experiment)(user, suite, agents,
                                                               concurrency=3)
    seen = []
    done = await runner.run_experiment(experiment.pk, on_progress=lambda d, t: seen.append((d, t)))

    assert done.status == "succeeded" and done.started_at and done.finished_at
    assert at_once.most == 3  # never more runs in flight than allowed (and the limit is used)
    assert seen == [(i, 8) for i in range(1, 9)]
    rows = await sync_to_async(lambda: list(done.results.select_related("run", "case")))()
    assert len(rows) == 8 and {r.status for r in rows} == {"done"}
    assert all(r.passed and r.score == 1.0 for r in rows)
    assert all(r.run.status == "succeeded" and r.run.input == r.case.question and
               r.run.final_answer == "The answer is 4." for r in rows)
    assert await sync_to_async(Run.objects.count)() == 8  # normal runs, listed under Runs


@with_db
async def test_a_failing_case_does_not_stop_the_others(fake_llm, profile, user):
    fake_llm.responder = lambda body: (Fail(500, "the model crashed")
                                       if "boom" in question_of(body) else "Paris")
    agents = await sync_to_async(make_agents)(profile, 1)
    suite = await sync_to_async(make_suite)(
        ("Capital of France?", "Paris", "exact"), ("boom?", "Paris", "exact"),
        ("Capital again?", "(", "regex"), ("And once more?", "paris", "contains"))
    experiment = await sync_to_async(runner.create_experiment)(user, suite, agents,
                                                               concurrency=1)
    done = await runner.run_experiment(experiment.pk)
    got = await sync_to_async(results)(done)

    assert done.status == "succeeded"
    assert got[("Capital of France?", "Agent 0")].passed is True
    assert got[("And once more?", "Agent 0")].passed is True
    crashed = got[("boom?", "Agent 0")]
    assert crashed.status == "error" and crashed.score is None
    assert crashed.error.startswith("the run failed") and "the model crashed" in crashed.error
    bad_regex = got[("Capital again?", "Agent 0")]
    assert bad_regex.status == "error" and "invalid regular expression '('" in bad_regex.error


@with_db
async def test_seconds_per_run_caps_each_runs_timeout_but_never_raises_it(fake_llm, profile,
                                                                         user):
    fake_llm.responder = lambda body: (time.sleep(3) or "late"
                                       if "slow" in question_of(body) else "4")
    agents = await sync_to_async(make_agents)(profile, 1)
    suite = await sync_to_async(make_suite)(("slow?", "4", "exact"), ("2 + 2?", "4", "exact"))
    experiment = await sync_to_async(runner.create_experiment)(user, suite, agents,
                                                               concurrency=1, run_timeout_s=1)
    done = await runner.run_experiment(experiment.pk)
    got = await sync_to_async(results)(done)

    slow = got[("slow?", "Agent 0")]  # cut at 1 s, not at the agent's limit (nor answered)
    assert slow.status == "error" and "timed out after 1 s" in slow.error
    assert slow.run.status == "timed_out" and slow.run.agent_snapshot["limits"][
        "total_timeout_s"] == 1
    assert got[("2 + 2?", "Agent 0")].passed is True
    # A cap above the agent's own limit leaves the agent's limit alone.
    agent = agents[0]
    agent.total_timeout_s = 5
    await sync_to_async(agent.save)()
    again = await sync_to_async(runner.create_experiment)(user, suite, [agent],
                                                          run_timeout_s=600)
    run = await sync_to_async(runner._start_pair)(
        await sync_to_async(lambda: again.results.first().pk)())
    assert run[2].agent_snapshot["limits"]["total_timeout_s"] == 5


@with_db
async def test_a_case_that_timed_out_waiting_for_a_busy_model_is_model_busy_not_failed(
        fake_llm, profile, user, settings):
    """Issue 38: the model answers one request at a time (like llama.cpp) and a chat question
    holds it when the experiment starts. The case's run waits its turn (not charged to it),
    then runs out of its own second on a slow reply: it waited longer than it ran, so the
    result is "model busy", left out of the pass rate, not the agent's failure."""
    settings.AGENTLAB_MODEL_CONCURRENCY = 1  # this endpoint takes one request at a time
    server = threading.Lock()
    seconds = {"chat": 2.5, "late": 1.15}

    def answer(body):
        question = question_of(body)
        with server:  # one at a time, the rest wait inside the server
            time.sleep(next((s for word, s in seconds.items() if word in question), 0.01))
        return "4"

    fake_llm.responder = answer
    agents = await sync_to_async(make_agents)(profile, 1)
    agents[0].total_timeout_s = 1
    await sync_to_async(agents[0].save)()
    suite = await sync_to_async(make_suite)(("late?", "4", "exact"), ("2 + 2?", "4", "exact"))
    experiment = await sync_to_async(runner.create_experiment)(user, suite, agents,
                                                               concurrency=1)
    chat = asyncio.ensure_future(
        (await sync_to_async(model_for)(await sync_to_async(to_config)(profile))).chat(
            [{"role": "user", "content": "a chat question"}]))
    await await_until(lambda: fake_llm.requests, timeout=10)  # the chat holds the model
    done = await runner.run_experiment(experiment.pk)
    assert (await chat).text == "4"
    got = await sync_to_async(results)(done)

    late = got[("late?", "Agent 0")]
    assert late.run.status == "timed_out"  # on its own clock: the wait was not charged
    assert late.status == "error" and late.scorer_detail["model_busy"] is True, late.error
    assert late.error.startswith("the model was busy") and "not counted" in late.error.lower()
    assert late.scorer_detail["waited_ms"] * 2 >= late.scorer_detail["wall_ms"] > 0
    steps = await sync_to_async(list)(late.run.steps.filter(kind="llm"))
    assert steps[0].meta["queued_ms"] > 1000  # the wait is on the step
    assert got[("2 + 2?", "Agent 0")].passed is True
    (row,) = await sync_to_async(agent_summary)(done)
    assert (row["finished"], row["errors"], row["busy"], row["passed"]) == (1, 0, 1, 1)
    assert row["pass_rate"] == 1.0 and row["mean_score"] == 1.0


@with_db
async def test_a_cancelled_experiment_keeps_its_finished_results(fake_llm, profile, user):
    second_started, release = threading.Event(), threading.Event()

    def answer(body):
        if "second" in question_of(body):
            second_started.set()
            release.wait(5)  # held until the test has cancelled
        return "42"

    fake_llm.responder = answer
    agents = await sync_to_async(make_agents)(profile, 1)
    suite = await sync_to_async(make_suite)(("first?", "42", "numeric"),
                                            ("second?", "42", "numeric"),
                                            ("third?", "42", "numeric"))
    experiment = await sync_to_async(runner.create_experiment)(user, suite, agents,
                                                               concurrency=1)
    task = asyncio.get_running_loop().create_task(runner.run_experiment(experiment.pk))
    try:
        assert await asyncio.to_thread(second_started.wait, 5)
        assert await runner.acancel_experiment(experiment.pk) is True
        done = await asyncio.wait_for(task, 5)
    finally:
        release.set()
    got = await sync_to_async(results)(done)

    assert done.status == "cancelled"
    first = got[("first?", "Agent 0")]
    assert first.status == "done" and first.score == 1.0 and first.run.status == "succeeded"
    second = got[("second?", "Agent 0")]
    assert second.status == "cancelled" and second.run.status == "cancelled"
    third = got[("third?", "Agent 0")]
    assert third.status == "cancelled" and third.run is None
    assert await sync_to_async(done.progress)() == (3, 3)
    assert await runner.acancel_experiment(experiment.pk) is False  # already over


@with_db
async def test_an_experiment_started_here_is_in_the_registry_while_it_runs(fake_llm, profile,
                                                                          user):
    """Its entry holds its task and, while a pair runs, its control with that pair's run;
    nothing of it is left once it ends."""
    asked, release = threading.Event(), threading.Event()

    def answer(body):
        asked.set()
        release.wait(5)
        return "42"

    fake_llm.responder = answer
    agents = await sync_to_async(make_agents)(profile, 1)
    suite = await sync_to_async(make_suite)(("6 * 7?", "42", "numeric"))
    experiment = await sync_to_async(runner.create_experiment)(user, suite, agents)
    task = runner.start_experiment(experiment)
    try:
        assert await asyncio.to_thread(asked.wait, 5)
        entry = EXPERIMENTS.entry(experiment.pk)
        assert entry is not None and entry.task is task
        result = await Result.objects.aget(experiment=experiment)
        assert entry.control.runs == {result.run_id}
    finally:
        release.set()
    assert (await asyncio.wait_for(task, 10)).status == "succeeded"
    await await_until(lambda: experiment.pk not in EXPERIMENTS,
                      message="the registry lets go of the experiment")


@with_db
async def test_progress_is_published_to_the_experiment_group(fake_llm, profile, user):
    fake_llm.responder = lambda body: "7"
    agents = await sync_to_async(make_agents)(profile, 1)
    suite = await sync_to_async(make_suite)(("3 + 4?", "7", "numeric"))
    experiment = await sync_to_async(runner.create_experiment)(user, suite, agents)
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(f"experiment-{experiment.pk}", channel)
    await runner.run_experiment(experiment.pk)
    progress = await asyncio.wait_for(layer.receive(channel), 2)
    result = await sync_to_async(Result.objects.get)(experiment=experiment)
    assert progress == {"type": "experiment.progress", "done": 1, "total": 1,
                        "result_id": result.pk, "result_status": "done"}
    assert (await asyncio.wait_for(layer.receive(channel), 2))["status"] == "succeeded"


@with_db
def test_an_experiment_needs_agents_cases_and_a_judge_for_judged_cases(profile, user):
    agents = make_agents(profile, 1)
    empty = Suite.objects.create(name="Empty")
    with pytest.raises(ValueError, match="has no cases"):
        runner.create_experiment(user, empty, agents)
    with pytest.raises(ValueError, match="at least one agent"):
        runner.create_experiment(user, empty, [])
    judged = make_suite(("Explain tides.", "", "llm_judge"), name="Judged")
    with pytest.raises(ValueError, match="1 case\\(s\\) use the LLM judge"):
        runner.create_experiment(user, judged, agents)
    assert not Experiment.objects.exists()  # nothing half-created


@with_db
async def test_the_llm_judge_scores_with_its_own_profile_and_keeps_its_reasoning(
        fake_llm, profile, user):
    def answer(body):
        if "You are grading" in question_of(body):
            return '{"reasoning": "Mentions the moon.", "score": 8, "passed": true}'
        return "The moon's gravity pulls the sea."

    fake_llm.responder = answer
    agents = await sync_to_async(make_agents)(profile, 1)

    def setup():
        suite = Suite.objects.create(name="Judged")
        Case.objects.create(suite=suite, question="Why are there tides?", scorer="llm_judge",
                            rubric="Names the moon's gravity.")
        return suite

    suite = await sync_to_async(setup)()
    experiment = await sync_to_async(runner.create_experiment)(user, suite, agents,
                                                               judge_profile=profile)
    await runner.run_experiment(experiment.pk)
    result = await sync_to_async(Result.objects.get)(experiment=experiment)
    assert (result.status, result.score, result.passed) == ("done", 0.8, True)
    assert result.scorer_detail["reasoning"] == "Mentions the moon."
    assert result.scorer_detail["profile"] == "Scripted"
    judge_prompt = question_of(fake_llm.last_request)
    assert "Names the moon's gravity." in judge_prompt
    assert "The moon's gravity pulls the sea." in judge_prompt
    # What the judge spent is summed apart from what the agent spent.
    detail = result.scorer_detail
    run = await sync_to_async(lambda: result.run)()
    [row] = await sync_to_async(agent_summary)(experiment)
    assert row["judge_tokens"] == detail["tokens_in"] + detail["tokens_out"] > 0
    assert row["tokens"] == run.tokens_in + run.tokens_out


@with_db
async def test_an_unreadable_judge_reply_is_an_error_not_a_zero(fake_llm, profile, user):
    fake_llm.responder = lambda body: ("I cannot decide." if "You are grading"
                                       in question_of(body) else "Because of the moon.")
    agents = await sync_to_async(make_agents)(profile, 1)
    suite = await sync_to_async(make_suite)(("Why tides?", "the moon", "llm_judge"))
    experiment = await sync_to_async(runner.create_experiment)(user, suite, agents,
                                                               judge_profile=profile)
    done = await runner.run_experiment(experiment.pk)
    result = await sync_to_async(Result.objects.get)(experiment=experiment)
    assert result.status == "error" and result.score is None
    assert "judge: unreadable reply" in result.error
    assert result.scorer_detail["reply"] == "I cannot decide."
    assert done.status == "failed" and "every pair failed" in done.error


@with_db
def test_rerun_copies_the_settings_and_points_at_the_earlier_experiment(profile, user):
    agents = make_agents(profile, 2)
    suite = make_suite(("a?", "a", "exact"), ("b?", "b", "exact"), ("c?", "c", "exact"))
    first = runner.create_experiment(user, suite, agents, concurrency=4, case_limit=2,
                                     title="Baseline", judge_profile=profile, run_timeout_s=30)
    again = runner.rerun(first)
    assert again.previous == first and again.status == "queued"
    assert (again.concurrency, again.case_limit, again.title, again.judge_profile,
            again.run_timeout_s) == (4, 2, "Baseline", profile, 30)
    assert set(again.agents.all()) == set(agents)
    assert again.results.count() == 4 and again.progress() == (0, 4)  # 2 cases × 2 agents
    assert again.user == user


@with_db
def test_tags_pick_the_cases_before_the_limit_and_a_rerun_keeps_them(profile, user):
    agents = make_agents(profile, 1)
    suite = make_suite(("a?", "a", "exact"), ("b?", "b", "exact"), ("c?", "c", "exact"),
                       ("d?", "d", "exact"))
    for case, tags in zip(suite.cases.order_by("position"),
                          (["x"], ["y"], ["x", "z"], ["z"]), strict=True):
        case.tags = tags
        case.save()
    first = runner.create_experiment(user, suite, agents, case_tags=["z", "x", " "],
                                     case_limit=2)
    assert first.case_tags == ["x", "z"]
    assert sorted(r.case.question for r in first.results.all()) == ["a?", "c?"]
    again = runner.rerun(first)
    assert again.case_tags == ["x", "z"] and again.results.count() == 2
    with pytest.raises(ValueError, match="no case of the suite 'Arithmetic' is tagged sql"):
        runner.create_experiment(user, suite, agents, case_tags=["sql"])


@with_db
def test_staff_rerunning_someone_elses_experiment_own_the_new_one(profile, user, staff):
    suite = make_suite(("a?", "a", "exact"))
    first = runner.create_experiment(user, suite, make_agents(profile, 1))
    assert runner.rerun(first, staff).user == staff


@with_db
def test_an_experiment_left_running_by_a_dead_process_is_marked_interrupted(profile, user):
    suite = make_suite(("a?", "a", "exact"), ("b?", "b", "exact"), ("c?", "c", "exact"))
    agents = make_agents(profile, 1)
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = socket.gethostname()
    left = runner.create_experiment(user, suite, agents)
    Experiment.objects.filter(pk=left.pk).update(status="running", worker=f"{host}:{dead.pid}")
    first, second, third = left.results.order_by("case__position")
    Result.objects.filter(pk=first.pk).update(status="done", score=1.0, passed=True)
    Result.objects.filter(pk=second.pk).update(status="running")
    alive = runner.create_experiment(user, suite, agents)  # this process: still running
    Experiment.objects.filter(pk=alive.pk).update(status="running", worker=process_id())

    assert runner.mark_interrupted() == 1
    left.refresh_from_db()
    assert left.status == "interrupted" and left.finished_at and "stopped" in left.error
    statuses = dict(left.results.values_list("case__position", "status"))
    assert statuses == {1: "done", 2: "cancelled", 3: "cancelled"}  # what finished stays
    assert Experiment.objects.get(pk=alive.pk).status == "running"
    assert runner.rerun(left).results.filter(status="pending").count() == 3


# -- summary, matrix, compare (hand-computed figures) ------------------------------------------

def finished(experiment, case, agent, status="done", score=None, passed=None, run=None):
    return Result.objects.create(experiment=experiment, case=case, agent=agent,
                                 agent_name=agent.name, status=status, score=score,
                                 passed=passed, run=run)


def run_row(user, agent, status="succeeded", tin=100, tout=20, cost=0.01, wall=1000.0):
    return Run.objects.create(user=user, agent=agent, agent_name=agent.name, input="q",
                              status=status, tokens_in=tin, tokens_out=tout, cost_usd=cost,
                              wall_ms=wall)


@pytest.fixture
def scored(db, profile, user):
    a, b = make_agents(profile, 2)
    suite = make_suite(("q1", "x", "exact"), ("q2", "x", "exact"), ("q3", "x", "exact"))
    c1, c2, c3 = suite.cases.order_by("position")
    exp = Experiment.objects.create(user=user, suite=suite, status="succeeded")
    exp.agents.set([a, b])
    finished(exp, c1, a, score=1.0, passed=True, run=run_row(user, a, tin=100, tout=10,
                                                              cost=0.01, wall=1000))
    finished(exp, c2, a, score=0.5, passed=False, run=run_row(user, a, tin=200, tout=20,
                                                               cost=0.02, wall=3000))
    finished(exp, c3, a, status="error", run=run_row(user, a, status="failed", tin=50,
                                                      tout=0, cost=0.0, wall=500))
    finished(exp, c1, b, score=0.0, passed=False, run=run_row(user, b, wall=2000))
    finished(exp, c2, b, score=1.0, passed=True, run=run_row(user, b, wall=4000))
    finished(exp, c3, b, status="cancelled")
    return exp, (a, b), (c1, c2, c3)


@with_db
def test_agent_summary_matches_hand_computed_figures(scored):
    exp, (a, b), _ = scored
    first, second = agent_summary(exp)
    assert first["agent"] == "Agent 0" and first["agent_id"] == a.pk
    # Agent 0: scores 1, 0.5 and an error (0) over 3 finished; 1 of 3 passed.
    assert first["mean_score"] == pytest.approx(0.5) and first["pass_rate"] == pytest.approx(1 / 3)
    assert (first["finished"], first["errors"], first["runs"], first["succeeded"]) == (3, 1, 3, 2)
    assert (first["tokens_in"], first["tokens_out"], first["tokens"]) == (350, 30, 380)
    assert first["cost_usd"] == pytest.approx(0.03) and first["wall_s"] == pytest.approx(4.5)
    assert first["mean_wall_s"] == pytest.approx(1.5)
    # Agent 1: the cancelled case is not counted.
    assert second["finished"] == 2 and second["cases"] == 3
    assert second["mean_score"] == pytest.approx(0.5) and second["pass_rate"] == 0.5
    assert second["tokens"] == 240 and second["wall_s"] == pytest.approx(6.0)


@with_db
def test_the_matrix_has_one_row_per_case_and_one_column_per_agent(scored):
    exp, (a, b), (c1, c2, c3) = scored
    cases, columns, cells = matrix(exp)
    assert cases == [c1, c2, c3]
    assert [c.name for c in columns] == ["Agent 0", "Agent 1"]
    assert [[cell.score for cell in row] for row in cells] == [[1.0, 0.0], [0.5, 1.0],
                                                               [None, None]]
    assert [cell.status for cell in cells[2]] == ["error", "cancelled"]


@with_db
def test_compare_says_what_got_better_and_what_worse(scored, user):
    exp, (a, b), (c1, c2, c3) = scored
    later = Experiment.objects.create(user=user, suite=exp.suite, previous=exp)
    finished(later, c1, a, score=1.0, passed=True)   # same
    finished(later, c2, a, score=1.0, passed=True)   # 0.5 -> 1: better
    finished(later, c3, a, score=0.5, passed=False)  # error (0) -> 0.5: better
    finished(later, c1, b, status="error")           # 0 -> error (0): same
    finished(later, c2, b, score=0.0, passed=False)  # 1 -> 0: worse
    finished(later, c3, b, score=1.0, passed=True)   # was cancelled: not compared
    changes = compare(later, exp)
    assert [(c.case.question, c.agent, c.change) for c in changes] == [
        ("q1", "Agent 0", "same"), ("q1", "Agent 1", "same"), ("q2", "Agent 0", "better"),
        ("q2", "Agent 1", "worse"), ("q3", "Agent 0", "better")]
    assert changes[2].before.score == 0.5 and changes[2].after.score == 1.0
    assert change_counts(changes) == {"better": 2, "worse": 1, "same": 2}


@with_db
def test_the_admin_shows_an_experiment_read_only_with_results_and_summary(scored, client,
                                                                          staff):
    exp, _, _ = scored
    client.force_login(staff)
    page = client.get(f"/admin/evals/experiment/{exp.pk}/change/").content.decode()
    assert "<td>Agent 0</td><td>50%</td><td>33%</td><td>2/3</td><td>380</td>" in page
    assert 'href="/runs/' in page and 'name="_save"' not in page
    assert client.get("/admin/evals/experiment/add/").status_code == 403
