"""The runs this process executes: each an asyncio task of the serving loop, recorded as it goes.

Consumers, views and commands only forward to a run (cancel, controls through
agentlab.runs.control);
nothing waits on one in a request. A run's task and its RunContext are parts of its entry in
the process's run registry (agentlab/runs/registry.py): `REGISTRY.held()` lists the runs
executing here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.db import transaction

from agentlab.paradigms.registry import get_paradigm
from agentlab.runs.build import build_context
from agentlab.runs.recorder import Recorder
from agentlab.runs.registry import REGISTRY
from agentlab.runs.room import ensure_room
from agentlab.runtime import slots
from agentlab.runtime.context import RunContext
from agentlab.runtime.loop import RunOutcome, execute
from agentlab.runtime.sinks import TeeSink
from traces.models import Run
from traces.otel import live as otel_live
from traces.otel.stream import LiveSink
from traces.owners import process_id


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
    # Spans to OTEL_EXPORTER_OTLP_ENDPOINT as the run goes, when set (traces.otel.live).
    exporter = await sync_to_async(LiveSink.for_run)(run) if otel_live.enabled() else None
    extra = (*watchers, exporter) if exporter is not None else watchers
    sink = TeeSink(recorder, *extra) if extra else recorder
    ctx = build_context(run.agent_snapshot, sink=sink, user_groups=groups,
                        is_superuser=user.is_superuser, history=run.history, **hooks)
    if prepare is not None:
        prepare(ctx)
    paradigm = get_paradigm(run.paradigm)()
    REGISTRY.put(run.pk, context=ctx)  # for cancel / pause / approvals
    try:
        async with slots.computing():  # a few runs compute at once; see runtime/slots.py
            return await execute(paradigm, ctx, run.input)
    finally:
        REGISTRY.clear(run.pk, "context", only=ctx)


def launch(run: Run, **hooks: Any) -> asyncio.Task[RunOutcome]:
    """Start `run` as an asyncio task of this process's loop; consumers only forward to it.
    The registry holds the task until it is done."""
    task = asyncio.get_running_loop().create_task(execute_run(run, **hooks), name=f"run-{run.pk}")
    REGISTRY.put(run.pk, task=task)
    task.add_done_callback(lambda _t: REGISTRY.clear(run.pk, "task", only=task))
    return task


def cancel(run_id: int) -> bool:
    """Cancel the run if its loop executes in this process; False if it does not."""
    entry = REGISTRY.entry(run_id)
    if entry is None or entry.context is None:
        return False
    entry.context.cancel()
    return True


@database_sync_to_async
def claim_queued(run_id: int) -> Run | None:
    """The queued run `run_id`, claimed for this process; None if someone started it.
    RunLimit when its owner already has as many runs going as they may."""
    with transaction.atomic():
        owner = Run.objects.filter(pk=run_id, status="queued", worker="").values_list(
            "user_id", flat=True).first()
        if owner is None:
            return None
        ensure_room(owner)
        claimed = Run.objects.filter(pk=run_id, status="queued", worker="").update(
            worker=process_id())
    return Run.objects.select_related("user").get(pk=run_id) if claimed else None


@database_sync_to_async
def is_queued(run_id: int) -> bool:
    return Run.objects.filter(pk=run_id, status="queued", worker="").exists()
