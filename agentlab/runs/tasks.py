"""The runs this process executes: each an asyncio task of the serving loop, recorded as it goes;
and the per-user limit on runs going at once (`ensure_room`).

Consumers, views and commands only forward to a run (cancel, controls through agentlab.live);
nothing waits on one in a request. A run's task and its RunContext are parts of its entry in
the process's run registry (traces/run_registry.py): `REGISTRY.held()` lists the runs
executing here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q, QuerySet

from agentlab.paradigms.registry import get_paradigm
from agentlab.runs.build import build_context
from agentlab.runtime import slots
from agentlab.runtime.context import RunContext
from agentlab.runtime.loop import RunOutcome, execute
from agentlab.runtime.sinks import TeeSink
from traces.models import Run
from traces.otel import live
from traces.otel.stream import LiveSink
from traces.recorder import Recorder
from traces.run_registry import REGISTRY
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
    # Spans to OTEL_EXPORTER_OTLP_ENDPOINT as the run goes, when set (traces.otel.live).
    exporter = await sync_to_async(LiveSink.for_run)(run) if live.enabled() else None
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
            worker=worker_id())
    return Run.objects.select_related("user").get(pk=run_id) if claimed else None


@database_sync_to_async
def is_queued(run_id: int) -> bool:
    return Run.objects.filter(pk=run_id, status="queued", worker="").exists()


# ---------------------------------------------------------------------- runs going per user

class RunLimit(ValueError):
    """The user already has as many runs going as one user may (the message says so)."""


def going(user_id: int) -> QuerySet[Run]:
    """The user's runs that hold a place: running, paused, or queued and claimed by a process
    (a one-off run nobody started yet holds none: it is counted when its page starts it)."""
    return Run.objects.filter(Q(status__in=("running", "paused"))
                              | Q(status="queued") & ~Q(worker=""), user_id=user_id)


def ensure_room(user: Any, more: int = 1) -> None:
    """Refuse (RunLimit) when `more` runs would take `user` (a user or an id) over
    settings.AGENTLAB_MAX_ACTIVE_RUNS (0: no limit). Call it inside the transaction that
    creates or claims the runs: it locks the user's row (PostgreSQL; SQLite's IMMEDIATE
    transactions already serialise writers), so two requests cannot both take the last place."""
    limit = settings.AGENTLAB_MAX_ACTIVE_RUNS
    if limit <= 0:
        return
    user_id = getattr(user, "pk", user)
    with transaction.atomic():
        list(get_user_model().objects.select_for_update().filter(pk=user_id).values_list("pk"))
        taken = going(user_id).count()
    if taken + more > limit:
        asked = "another run" if more == 1 else f"{more} more runs"
        raise RunLimit(f"You already have {taken} run{'s' * (taken != 1)} going and one user "
                       f"may have {limit} at once, so {asked} cannot start: wait for one to "
                       "finish, or cancel one.")
