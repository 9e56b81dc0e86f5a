"""Runs on workers (AGENTLAB_RUNS_ON=workers): real `manage.py worker` processes execute the
runs this process's sockets start, over the real PostgreSQL (the queue: procrastinate) and
Redis (the channel layer) of the scale profile (`python -m pytest -p tests.scale_profile`);
skipped on SQLite. The model is the scripted one (tests/fake_openai.py, real HTTP from the
workers), so each run's path is known: one calculator call, then the answer.

This test process plays the web process: its sockets (Channels' communicator, the real
consumer) start runs through the workers' engine, watch them and send controls; its pages and
functions start experiments and forks as the browser's POSTs do.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connection
from django.test import AsyncClient, Client
from django.urls import reverse

from agentlab.evals import runner as evals
from agentlab.evals.models import Case, Experiment, Result, Suite
from agentlab.forks.plans import create_fork
from agentlab.models import Tool
from agentlab.runs import control as run_control
from agentlab.runs import engine
from agentlab.runs.execution import execute_run
from agentlab.runs.registry import REGISTRY
from agentlab.runs.snapshot import create_run
from tests.factories import make_agents, scripted_profile
from tests.fake_openai import AtOnce, Delay, Reply
from tests.sockets import connect, frames_until, is_type, paused, synced
from tests.waiting import await_until
from tests.worker_pool import Workers
from traces.models import Run, Step
from traces.owners import WORKER_PREFIX, process_id

pytestmark = [pytest.mark.django_db(transaction=True)]

CALL = Reply(tool_calls=[("calculator", '{"expression": "6*7"}')])
ANSWER = Reply(text="6 times 7 is 42.")


@pytest.fixture(autouse=True)
def _postgres_and_redis() -> None:
    if connection.vendor != "postgresql" or not os.environ.get("REDIS_URL"):
        pytest.skip("runs on workers need PostgreSQL and Redis: run with -p tests.scale_profile")


@pytest.fixture
def workers(fake_llm) -> Iterator[Workers]:
    with connection.cursor() as cursor:  # jobs and workers of earlier tests
        cursor.execute("TRUNCATE procrastinate_jobs, procrastinate_events, "
                       "procrastinate_workers CASCADE")
    pool = Workers()
    yield pool
    pool.stop()


WORKER_ENGINE = "agentlab.workers.engine.WorkerEngine"


@pytest.fixture
def on_workers(settings: Any) -> None:
    """This process is a web process whose runs go to the workers."""
    settings.AGENTLAB_RUN_ENGINE = WORKER_ENGINE


async def start_on_socket(run: Run, user: Any, **debug: Any):
    comm = await connect(run.pk, user)
    await synced(comm)
    if debug:
        await comm.send_json_to({"action": "debug", **debug})
    await comm.send_json_to({"action": "start"})
    return comm


def run_page(run: Run, user: Any) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(reverse("run", args=[run.pk]))
    assert response.status_code == 200
    return response.content.decode()


def ended(f: dict) -> bool:
    return f["type"] == "final"


def trace(run: Run) -> list[tuple[int, str, str, str]]:
    return [(s.seq, s.kind, s.name, s.status) for s in Step.objects.filter(run=run)
            .order_by("seq")]


async def test_a_run_started_here_executes_on_a_worker_and_streams_back(
        workers, on_workers, calc_agent, user, fake_llm):
    fake_llm.script(CALL, ANSWER)
    workers.start(1)
    await workers.ready(1)
    run = await sync_to_async(create_run)(calc_agent, user, "What is 6*7?")
    comm = await start_on_socket(run, user)
    frames = await frames_until(comm, ended, timeout=60)
    assert frames[-1]["status"] == "succeeded" and frames[-1]["answer"] == "6 times 7 is 42."
    assert [f["seq"] for f in frames if f["type"] == "step"], "steps reached this socket"
    await comm.disconnect()
    held = await sync_to_async(workers.holder)(run)
    assert held.pid != os.getpid()  # executed by the worker process, not here


async def test_a_run_queued_while_no_worker_is_up_starts_when_one_comes(
        workers, on_workers, calc_agent, user, fake_llm):
    fake_llm.script(CALL, ANSWER)
    run = await sync_to_async(create_run)(calc_agent, user, "What is 6*7?")
    comm = await start_on_socket(run, user)
    await asyncio.sleep(0)  # the job is in the queue; nobody executes it
    assert (await Run.objects.aget(pk=run.pk)).status == "queued"
    workers.start(1)
    frames = await frames_until(comm, ended, timeout=90)
    assert frames[-1]["status"] == "succeeded"
    await comm.disconnect()


async def test_an_engine_run_left_without_a_job_is_given_one_and_executes(
        workers, calc_agent, user, fake_llm):
    """The process that saved a run for the engine (an experiment advancing) stopped before it
    queued the run's job: nothing would ever execute it. A worker's sweep gives it a job once
    it is AGENTLAB_TAKEOVER_S old, and it runs to its answer, with one job."""
    fake_llm.script(CALL, ANSWER)
    run = await sync_to_async(create_run)(calc_agent, user, "What is 6*7?",
                                          worker=WORKER_PREFIX + "gone-web-process")
    workers.start(1)

    async def over() -> Run | None:
        row = await Run.objects.aget(pk=run.pk)
        return row if row.status not in ("queued", "running") else None

    row = await await_until(over, timeout=60, message="the orphaned run ended")
    assert row.status == "succeeded" and row.final_answer == "6 times 7 is 42."
    assert row.worker.startswith(WORKER_PREFIX) and "gone-web-process" not in row.worker

    def jobs() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM procrastinate_jobs WHERE lock = %s",
                           [f"agentlab-run-{run.pk}"])
            return cursor.fetchone()[0]

    assert await sync_to_async(jobs)() == 1


async def test_controls_from_this_process_reach_the_worker_holding_the_run(
        workers, on_workers, calc_agent, user, fake_llm):
    """Step mode set before the start; the worker pauses, this socket and a second one see
    it; step, then resume with step mode off; a control the run cannot follow is refused
    with the worker's reason; a cancelled run ends cancelled."""
    fake_llm.script(CALL, ANSWER, CALL, ANSWER)
    workers.start(1)
    await workers.ready(1)
    run = await sync_to_async(create_run)(calc_agent, user, "What is 6*7?")
    comm = await start_on_socket(run, user, step_mode=True)
    first = await frames_until(comm, paused, timeout=60)
    assert "step mode" in first[-1]["detail"]["reason"]
    watcher = await connect(run.pk, user)  # a second socket: state asked of the worker
    state = await synced(watcher)
    status = next(f for f in state if f["type"] == "status")
    assert status["status"] == "paused" and status["debug"]["step_mode"] is True
    await comm.send_json_to({"action": "approve", "seq": 999})
    refused = await frames_until(comm, is_type("error"), timeout=20)
    assert "step 999 is not waiting for an approval" in refused[-1]["error"]
    await comm.send_json_to({"action": "debug", "step_mode": False})
    await comm.send_json_to({"action": "resume"})
    done = await frames_until(watcher, ended, timeout=60)
    assert done[-1]["status"] == "succeeded"
    await comm.disconnect()

    second = await sync_to_async(create_run)(calc_agent, user, "What is 6*7?")
    comm = await start_on_socket(second, user, step_mode=True)
    await frames_until(comm, paused, timeout=60)
    await comm.send_json_to({"action": "cancel"})
    done = await frames_until(comm, ended, timeout=60)
    assert done[-1]["status"] == "cancelled"
    await comm.disconnect()
    await watcher.disconnect()


async def test_a_second_account_cannot_reach_a_run_held_by_a_worker(
        workers, on_workers, calc_agent, user, other_user, fake_llm):
    """Bob's socket on Alice's paused run is refused before anything is forwarded: his
    cancel never reaches the worker, and Alice's resume does."""
    fake_llm.script(CALL, ANSWER)
    workers.start(1)
    await workers.ready(1)
    run = await sync_to_async(create_run)(calc_agent, user, "What is 6*7?")
    comm = await start_on_socket(run, user, step_mode=True)
    await frames_until(comm, paused, timeout=60)
    intruder = await connect(run.pk, other_user)
    assert (await intruder.receive_json_from())["error"] == "not found, or not yours to watch"
    assert (await intruder.receive_output(timeout=5))["type"] == "websocket.close"
    await intruder.send_json_to({"action": "cancel"})  # on a closed socket: goes nowhere
    await intruder.disconnect()
    # His frame was never forwarded: the worker still holds the run, paused.
    state = await engine.state(run.pk)
    assert state is not None and state["detail"]["waiting_for"] == "step"
    assert (await Run.objects.aget(pk=run.pk)).status == "paused"
    await comm.send_json_to({"action": "debug", "step_mode": False})
    await comm.send_json_to({"action": "resume"})
    done = await frames_until(comm, ended, timeout=60)
    assert done[-1]["status"] == "succeeded"
    await comm.disconnect()


@pytest.mark.parametrize("decision", ["approve", "deny"])
async def test_an_approval_on_a_worker_is_decided_from_a_socket_that_opens_later(
        decision, workers, on_workers, calc_agent, user, fake_llm):
    """The call that needs approval waits on the worker; a socket opened later gets the
    pending approval from the worker (state over the relay) and decides it there."""
    await Tool.objects.filter(name="calculator").aupdate(needs_approval=True)
    fake_llm.script(CALL, Reply(text="Done."))
    workers.start(1)
    await workers.ready(1)
    run = await sync_to_async(create_run)(calc_agent, user, "What is 6*7?")
    first = await start_on_socket(run, user)
    frames = await frames_until(first, paused, timeout=60)
    assert frames[-1]["detail"]["waiting_for"] == "approval"
    await first.disconnect()
    later = await connect(run.pk, user)
    approval = next(f for f in await synced(later) if f["type"] == "approval")
    assert approval["tool"] == "calculator" and approval["arguments"] == {"expression": "6*7"}
    if decision == "approve":
        await later.send_json_to({"action": "approve", "seq": approval["seq"],
                                  "arguments": {"expression": "6*8"}})
    else:
        await later.send_json_to({"action": "deny", "seq": approval["seq"], "reason": "no"})
    await frames_until(later, ended, timeout=60)
    await later.disconnect()
    tool = await (await Run.objects.aget(pk=run.pk)).steps.filter(kind="tool").aget()
    if decision == "approve":
        assert tool.input == {"expression": "6*8"} and "48" in tool.text
    else:
        assert tool.status == "error" and "denied this call: no" in tool.text


async def test_a_killed_workers_run_is_taken_over_and_continues_from_its_trace(
        workers, on_workers, calc_agent, user, fake_llm):
    """The reference: the same run on a worker, uninterrupted. Then the worker holding a run
    is killed (SIGKILL) while its second LLM call waits for the model: the other worker takes
    the run over within the takeover time, serves the first call and the tool result from
    the trace (the model is not asked again, the tool not run again), asks the interrupted
    call again, and ends with the same answer and the same steps, once each; the first new
    step says it was taken over."""
    fake_llm.script(CALL, ANSWER)
    workers.start(2)
    await workers.ready(2)
    reference = await sync_to_async(create_run)(calc_agent, user, "What is 6*7?")
    comm = await start_on_socket(reference, user)
    await frames_until(comm, ended, timeout=60)
    await comm.disconnect()
    expected = await sync_to_async(trace)(reference)

    fake_llm.reset()
    fake_llm.script(CALL, Delay(120, ANSWER), ANSWER)
    run = await sync_to_async(create_run)(calc_agent, user, "What is 6*7?")
    comm = await start_on_socket(run, user)
    await await_until(lambda: len(fake_llm.requests) == 2, timeout=60,
                      message="the run's second LLM call is waiting for the model")
    before = await sync_to_async(trace)(run)
    assert [s[1] for s in before if s[3] != "running"][:2] == ["llm", "tool"]
    holder = await sync_to_async(workers.holder)(run)
    holder.send_signal(signal.SIGKILL)
    frames = await frames_until(comm, ended, timeout=90)
    assert frames[-1]["status"] == "succeeded" and frames[-1]["answer"] == "6 times 7 is 42."
    await comm.disconnect()

    assert len(fake_llm.requests) == 3  # call 1 served from the trace; call 2 asked again
    got = await sync_to_async(trace)(run)
    assert [s[1:] for s in got] == [s[1:] for s in expected]  # same steps, once each
    assert [s[0] for s in got] == list(range(1, len(got) + 1))
    steps = [s async for s in Step.objects.filter(run=run).order_by("seq")]
    marked = [s for s in steps if "taken_over" in s.meta]
    assert len(marked) == 1 and marked[0].kind == "llm"
    note = marked[0].meta["taken_over"]
    assert note["after_seq"] == marked[0].seq - 1 and str(holder.pid) in note["from"]
    page = await sync_to_async(run_page)(run, user)
    assert 'class="pill taken-over"' in page and f"after step {note['after_seq']}" in page
    new_holder = await sync_to_async(workers.holder)(run)
    assert new_holder.pid != holder.pid
    # How soon it was taken over is a speed figure: `manage.py bench_engines` (SIGKILL) measures
    # it; here it is enough that it was, once, by another worker.


async def test_sigterm_lets_the_worker_finish_its_runs_before_it_exits(
        workers, on_workers, calc_agent, user, fake_llm):
    fake_llm.script(CALL, Delay(2, ANSWER))
    (proc,) = workers.start(1)
    await workers.ready(1)
    run = await sync_to_async(create_run)(calc_agent, user, "What is 6*7?")
    comm = await start_on_socket(run, user)
    await await_until(lambda: len(fake_llm.requests) == 2, timeout=60,
                      message="the second call is under way")
    proc.send_signal(signal.SIGTERM)
    frames = await frames_until(comm, ended, timeout=60)
    assert frames[-1]["status"] == "succeeded"
    await comm.disconnect()
    await await_until(lambda: proc.poll() is not None, timeout=30,
                      message="the worker exits once its run is over")


# ------------------------------------------------------------------ experiments and forks


def question_of(body: dict) -> str:
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")


async def test_an_experiment_runs_on_the_workers_and_each_pair_is_scored_where_it_ends(
        workers, on_workers, user, fake_llm):
    """An experiment started from this (web) process: each pair's run executes on one of two
    workers, at most `concurrency` at once across both, and is scored there as it ends; its
    progress and its end reach the experiment's group from the workers, and this process
    holds none of its runs. The model is the scripted OpenAI-compatible server
    (tests/fake_openai.py) answering each question by its text, slowly, so the runs overlap
    whatever order they ask in."""
    replies = {"3 + 4?": "7", "6 * 7?": "42", "2 + 2?": "4", "9 - 1?": "8"}
    fake_llm.responder = at_once = AtOnce(
        lambda body: f"It is {replies[question_of(body)]}.", seconds=0.5)
    workers.start(2)
    await workers.ready(2)

    def create() -> Experiment:
        agents = make_agents(scripted_profile(fake_llm.base_url), 1)
        suite = Suite.objects.create(name="Arithmetic")
        for position, (question, expected) in enumerate(
                [("3 + 4?", "7"), ("6 * 7?", "42"), ("2 + 2?", "5"), ("9 - 1?", "8")], 1):
            Case.objects.create(suite=suite, position=position, question=question,
                                expected=expected, scorer="numeric")
        return evals.create_experiment(user, suite, agents, concurrency=2)

    experiment = await sync_to_async(create)()
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(f"experiment-{experiment.pk}", channel)
    await evals.start_experiment(experiment)  # what the page's POST does: returns once queued
    assert REGISTRY.held() == []
    progress: list[dict] = []
    ends: list[dict] = []
    # Each worker publishes its own pairs' progress, and whichever ends the experiment its
    # status: two publishers, so the status may overtake the other worker's last progress.
    async with asyncio.timeout(90):
        while not ends or len(progress) < 4:
            message = await layer.receive(channel)
            (ends if message["type"] == "experiment.status" else progress).append(message)

    assert [m["status"] for m in ends] == ["succeeded"]
    assert len(progress) == 4 and max(m["done"] for m in progress) == 4
    assert {m["total"] for m in progress} == {4}
    experiment = await Experiment.objects.aget(pk=experiment.pk)
    assert experiment.status == "succeeded" and experiment.finished_at is not None
    results = [r async for r in Result.objects.filter(experiment=experiment)
               .select_related("case", "run").order_by("case__position")]
    assert {m["result_id"] for m in progress} == {r.pk for r in results}
    assert [(r.status, r.score, r.passed) for r in results] == [
        ("done", 1.0, True), ("done", 1.0, True), ("done", 0.0, False), ("done", 1.0, True)]
    assert results[2].scorer_detail["answer_seen"] == "It is 4."
    assert 1 <= at_once.most <= 2  # the experiment's concurrency, across both workers
    holders = {(await sync_to_async(workers.holder)(r.run)).pid for r in results}
    assert os.getpid() not in holders  # every run executed by a worker process


async def test_a_fork_with_an_edited_observation_executes_on_a_worker_as_it_does_here(
        workers, settings, calc_agent, user, fake_llm):
    """A source run (llm, tool, llm, tool, llm) is forked at its first tool step with the
    observation edited, twice through the fork page: once executed in this process (the
    embedded profile's engine, the reference), once by a worker, which rebuilds what the fork
    follows from the database (the source's steps, the fork's step, the edit). Both end with
    the same steps: 1..2 from the record (the edited one marked), the rest live, and the model
    is asked only for what follows the fork. The model is the scripted OpenAI-compatible
    server (tests/fake_openai.py)."""
    fake_llm.script(CALL, Reply(tool_calls=[("calculator", '{"expression": "42+1"}')]),
                    Reply(text="6*7+1 is 43."))
    workers.start(1)
    await workers.ready(1)
    source = await sync_to_async(create_run)(calc_agent, user, "What is 6*7, plus 1?")
    await execute_run(source)  # recorded in this process
    source = await Run.objects.aget(pk=source.pk)
    client = AsyncClient()
    await client.aforce_login(user)

    async def fork_on(run_engine: str) -> tuple[Run, list[dict]]:
        settings.AGENTLAB_RUN_ENGINE = run_engine
        fake_llm.reset()
        fake_llm.script(Reply(text="6*7+1 is 101."))
        response = await client.post(reverse("run_fork", args=[source.pk, 2]),
                                     {"observation": "100"})
        assert response.status_code == 302, response.content[:500]
        pk = int(response["Location"].rstrip("/").rsplit("/", 1)[1])
        comm = await connect(pk, user)
        frames = await synced(comm)
        if not any(ended(f) for f in frames):
            frames += await frames_until(comm, ended, timeout=60)
        await comm.disconnect()
        return await Run.objects.aget(pk=pk), list(fake_llm.requests)

    here, asked_here = await fork_on("agentlab.runs.engine.InProcess")
    there, asked_there = await fork_on(WORKER_ENGINE)

    held = await sync_to_async(workers.holder)(there)
    assert held.pid != os.getpid()  # executed by the worker
    assert here.worker == process_id()  # the reference: executed here
    for fork, asked in ((here, asked_here), (there, asked_there)):
        assert fork.status == "succeeded" and fork.final_answer == "6*7+1 is 101."
        assert (fork.parent_run_id, fork.fork_seq) == (source.pk, 2)
        assert len(asked) == 1  # only the call after the fork reached the model
        assert [m["content"] for m in asked[0]["messages"] if m["role"] == "tool"] == ["100"]
    assert await sync_to_async(fork_shape)(there) == await sync_to_async(fork_shape)(here) == [
        ("llm", "ok", {"replayed": True, "source_seq": 1}),
        ("tool", "ok", {"replayed": True, "source_seq": 2, "edited": True}),
        ("llm", "ok", {}), ("final", "ok", {})]
    texts = [s async for s in Step.objects.filter(run=there).order_by("seq")
             .values_list("text", flat=True)]
    assert texts[1] == "100" and texts[-1] == "6*7+1 is 101."
    assert there.agent_snapshot["fork_edit"] == {"observation": "100"}


def fork_shape(run: Run) -> list[tuple[str, str, dict]]:
    """Each step's kind, status and where it came from (the marks a fork's trace shows)."""
    marks = ("replayed", "source_seq", "edited", "diverged_from")
    return [(s.kind, s.status, {k: s.meta[k] for k in marks if k in s.meta})
            for s in Step.objects.filter(run=run).order_by("seq")]


async def test_a_fork_taken_over_before_its_fork_step_goes_on_serving_its_record(
        workers, on_workers, calc_agent, user, fake_llm):
    """A fork at step 4 (the second tool step, its observation edited) starts on a worker in
    step mode and pauses at its first step; that worker is killed. The other worker takes it
    over with nothing of the fork's trace finished: it serves steps 1..4 from the source's
    record (the edit included), asks the model only for what follows, and marks the steps as
    an uninterrupted fork does. The model is the scripted OpenAI-compatible server
    (tests/fake_openai.py)."""
    fake_llm.script(CALL, Reply(tool_calls=[("calculator", '{"expression": "42+1"}')]),
                    Reply(text="6*7+1 is 43."))
    source = await sync_to_async(create_run)(calc_agent, user, "What is 6*7, plus 1?")
    await execute_run(source)  # recorded in this process: llm, tool, llm, tool, llm, final
    fake_llm.reset()
    fake_llm.script(Reply(text="6*7+1 is 101."))
    workers.start(2)
    await workers.ready(2)
    fork = await sync_to_async(create_fork)(await Run.objects.aget(pk=source.pk), user, 4,
                                            edited_observation="100")
    comm = await connect(fork.pk, user)
    await synced(comm)
    await engine.submit(fork, run_control.DebugSettings(step_mode=True))
    await frames_until(comm, paused, timeout=60)
    holder = await sync_to_async(workers.holder)(fork)
    holder.send_signal(signal.SIGKILL)
    again = await frames_until(comm, paused, timeout=60)  # taken over: step mode goes with it
    assert again[-1]["detail"]["pending"]["seq"] == 1
    await comm.send_json_to({"action": "debug", "step_mode": False})
    await comm.send_json_to({"action": "resume"})
    done = await frames_until(comm, ended, timeout=60)
    await comm.disconnect()

    assert done[-1]["status"] == "succeeded" and done[-1]["answer"] == "6*7+1 is 101."
    assert (await sync_to_async(workers.holder)(fork)).pid != holder.pid
    assert len(fake_llm.requests) == 1  # steps 1..4 came from the record
    tool_messages = [m["content"] for m in fake_llm.requests[0]["messages"]
                     if m["role"] == "tool"]
    assert tool_messages == ["42", "100"]
    assert await sync_to_async(fork_shape)(fork) == [
        ("llm", "ok", {"replayed": True, "source_seq": 1}),
        ("tool", "ok", {"replayed": True, "source_seq": 2}),
        ("llm", "ok", {"replayed": True, "source_seq": 3}),
        ("tool", "ok", {"replayed": True, "source_seq": 4, "edited": True}),
        ("llm", "ok", {}), ("final", "ok", {})]
    steps = [s async for s in Step.objects.filter(run=fork).order_by("seq")]
    assert [s.seq for s in steps if "taken_over" in s.meta] == [1]
