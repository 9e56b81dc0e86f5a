"""The runs this process executes: each an asyncio task of the serving loop, recorded as it goes.

Consumers, views and commands only forward to a run (cancel, controls through agentlab.live);
nothing waits on one in a request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async

from agentlab.paradigms.registry import get_paradigm
from agentlab.runs.build import build_context
from agentlab.runtime import slots
from agentlab.runtime.context import RunContext
from agentlab.runtime.loop import RunOutcome, execute
from agentlab.runtime.sinks import TeeSink
from traces.models import Run
from traces.recorder import Recorder
from traces.workers import worker_id


async def execute_run(run: Run, *, watchers: tuple[Any, ...] = (),
                      prepare: Callable[[RunContext], None] | None = None,
                      **hooks: Any) -> RunOutcome:
    """Run a recorded Run to its end in this task; every step is persisted, then published
    (and then shown to `watchers`, extra sinks such as the terminal). `prepare` may rewire the
    built context before it runs (replay and forks wrap its models, tools and sink)."""
    user = await sync_to_async(lambda: run.user)()
    groups = await sync_to_async(lambda: list(user.groups.values_list("name", flat=True)))()
    # A finished step's row is waited for only while other runs wait for the CPU.
    recorder = Recorder(run.pk, ahead=slots.free)
    sink = TeeSink(recorder, *watchers) if watchers else recorder
    ctx = build_context(run.agent_snapshot, sink=sink, user_groups=groups,
                        is_superuser=user.is_superuser, history=run.history, **hooks)
    if prepare is not None:
        prepare(ctx)
    paradigm = get_paradigm(run.paradigm)()
    RUNNING[run.pk] = ctx
    try:
        async with slots.computing():  # a few runs compute at once; see runtime/slots.py
            return await execute(paradigm, ctx, run.input)
    finally:
        RUNNING.pop(run.pk, None)


# Runs being executed by this process: run id -> its context (for cancel / pause / approvals).
RUNNING: dict[int, RunContext] = {}
TASKS: dict[int, asyncio.Task[RunOutcome]] = {}


def launch(run: Run, **hooks: Any) -> asyncio.Task[RunOutcome]:
    """Start `run` as an asyncio task of this process's loop; consumers only forward to it."""
    task = asyncio.get_running_loop().create_task(execute_run(run, **hooks), name=f"run-{run.pk}")
    TASKS[run.pk] = task
    task.add_done_callback(lambda _t: TASKS.pop(run.pk, None))
    return task


def cancel(run_id: int) -> bool:
    ctx = RUNNING.get(run_id)
    if ctx is None:
        return False
    ctx.cancel()
    return True


@database_sync_to_async
def claim_queued(run_id: int) -> Run | None:
    """The queued run `run_id`, claimed for this process; None if someone started it."""
    claimed = Run.objects.filter(pk=run_id, status="queued", worker="").update(worker=worker_id())
    return Run.objects.select_related("user").get(pk=run_id) if claimed else None


@database_sync_to_async
def is_queued(run_id: int) -> bool:
    return Run.objects.filter(pk=run_id, status="queued", worker="").exists()
