"""A worker whose event loop stalls never has its run executed by two workers (issue 35).

Real worker processes (tests/stalling_worker.py: `manage.py worker` plus the tool `stall_loop`)
on the scale profile's PostgreSQL and Redis (`python -m pytest -p tests.scale_profile`; skipped
on SQLite), with a takeover time of 3 s. The tool's first call blocks the worker's event loop
for 7 s, longer than the takeover time:

- blocking the loop only (the GIL free, as most blocking calls leave it): the worker's
  heartbeat comes from a thread of its own, so the worker is not taken for dead; the run is
  not taken over and ends on the worker that started it;
- blocking every thread of the process (the GIL held, as a backtracking `re` pattern does):
  the heartbeat stops too, and the other worker takes the run over; the first worker, its loop
  free again, finds its lease lapsed before it records anything more and exits (EXIT_LOST), so
  the run is executed on by one worker only. The fence (a write only while `Run.worker` names
  this execution) is what holds if it got further: tests/test_writer.py::…fenced… checks it.

Either way: the steps' seqs are unique and in order, one final, the model asked once per call
in the trace, and the run ends succeeded with the scripted answer.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from agentlab.models import Agent, ModelProfile, Tool
from agentlab.runs.snapshot import create_run
from agentlab.workers.lease import EXIT_LOST
from tests.fake_openai import Reply
from tests.sockets import connect, frames_until, synced
from tests.waiting import await_until
from tests.worker_pool import TAKEOVER_S, Workers
from traces.models import Run, Step

pytestmark = [pytest.mark.django_db(transaction=True)]

STALL_S = TAKEOVER_S + 4
ANSWER = Reply(text="Done: the loop went on.")


def stall(*, hold_gil: bool) -> Reply:
    arguments = f'{{"seconds": {STALL_S}, "hold_gil": {"true" if hold_gil else "false"}}}'
    return Reply(tool_calls=[("stall_loop", arguments)])


@pytest.fixture(autouse=True)
def _postgres_and_redis() -> None:
    if connection.vendor != "postgresql" or not os.environ.get("REDIS_URL"):
        pytest.skip("runs on workers need PostgreSQL and Redis: run with -p tests.scale_profile")


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "stalled"


@pytest.fixture
def workers(fake_llm, marker: Path) -> Iterator[Workers]:
    with connection.cursor() as cursor:  # jobs and workers of earlier tests
        cursor.execute("TRUNCATE procrastinate_jobs, procrastinate_events, "
                       "procrastinate_workers CASCADE")
    pool = Workers(entry=("-m", "tests.stalling_worker"))
    pool.env["AGENTLAB_TEST_STALL_MARKER"] = str(marker)
    yield pool
    pool.stop()


@pytest.fixture
def stall_agent(fake_llm, settings: Any) -> Agent:
    """A function-calling ReAct agent with the tool `stall_loop`, on the scripted model; this
    process's runs go to the workers."""
    settings.AGENTLAB_RUN_ENGINE = "agentlab.workers.engine.WorkerEngine"
    profile = ModelProfile.objects.create(name="Scripted", base_url=fake_llm.base_url,
                                          model="scripted-model", retries=0)
    agent = Agent(name="Stall agent", paradigm="react", model_profile=profile,
                  params={"mode": "function_calling"})
    agent.full_clean()
    agent.save()
    agent.tools.set([Tool.objects.create(name="stall_loop")])
    return agent


def steps_of(run: Run) -> list[Step]:
    return list(Step.objects.filter(run=run).order_by("seq"))


async def run_to_its_end(agent: Agent, user: Any) -> tuple[Run, dict]:
    run = await sync_to_async(create_run)(agent, user, "Stall, then answer.")
    comm = await connect(run.pk, user)
    await synced(comm)
    await comm.send_json_to({"action": "start"})
    frames = await frames_until(comm, lambda f: f["type"] == "final", timeout=90)
    await comm.disconnect()
    return await Run.objects.aget(pk=run.pk), frames[-1]


def executed_once(run: Run, fake_llm) -> list[Step]:
    """The trace is one execution's: seqs 1..n once each, one final, each LLM step asked of
    the model once (no call made twice)."""
    steps = steps_of(run)
    assert [s.seq for s in steps] == list(range(1, len(steps) + 1))
    assert [s.kind for s in steps if s.kind == "final"] == ["final"]
    assert all(s.status != "running" for s in steps)
    llm = [s for s in steps if s.kind == "llm"]
    assert len(llm) == 2 and len(fake_llm.requests) == 2, (len(fake_llm.requests), llm)
    return steps


async def stalled_run(workers, stall_agent, user, fake_llm, *, hold_gil: bool) -> Run:
    """A run on two workers whose tool stalls its worker's loop; it ends with the answer."""
    fake_llm.script(stall(hold_gil=hold_gil), ANSWER)
    workers.start(2)
    await workers.ready(2)
    run, final = await run_to_its_end(stall_agent, user)
    assert final["status"] == "succeeded" and final["answer"] == "Done: the loop went on."
    return run


async def test_a_stalled_loop_keeps_its_run_and_finishes_it(
        workers, stall_agent, user, fake_llm, marker):
    run = await stalled_run(workers, stall_agent, user, fake_llm, hold_gil=False)
    # Whatever ended the run, the stalled call is over by now, and whatever it led to done.
    await await_until(lambda: time.time() > marker.stat().st_mtime + STALL_S + 2,
                      timeout=STALL_S + 10, message="the stall is over")
    run = await Run.objects.aget(pk=run.pk)
    assert run.status == "succeeded"

    steps = await sync_to_async(executed_once)(run, fake_llm)
    tool = next(s for s in steps if s.kind == "tool")
    assert tool.text == "stalled"  # the stalled call's own result: not made again elsewhere
    assert not [s for s in steps if "taken_over" in s.meta]  # nobody took it over
    staller = int(marker.read_text())
    assert (await sync_to_async(workers.holder)(run)).pid == staller
    assert all(p.poll() is None for p in workers.procs)  # both workers still up


async def test_a_loop_stalled_with_the_gil_held_is_taken_over_and_the_first_worker_stops(
        workers, stall_agent, user, fake_llm, marker):
    run = await stalled_run(workers, stall_agent, user, fake_llm, hold_gil=True)
    assert run.status == "succeeded"

    staller = next(p for p in workers.procs if p.pid == int(marker.read_text()))
    await await_until(lambda: staller.poll() is not None, timeout=30,
                      message="the worker whose run was taken over stops")
    assert staller.returncode == EXIT_LOST
    steps = await sync_to_async(executed_once)(run, fake_llm)
    tool = next(s for s in steps if s.kind == "tool")
    # Made again by the worker that took the run over (as after a SIGKILL): the stalled
    # worker's result was never recorded.
    assert tool.text == "went on at once"
    marked = [s for s in steps if "taken_over" in s.meta]
    assert len(marked) == 1 and str(staller.pid) in marked[0].meta["taken_over"]["from"]
    assert (await sync_to_async(workers.holder)(run)).pid != staller.pid
