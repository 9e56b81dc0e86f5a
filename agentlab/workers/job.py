"""The job a worker executes for one run (its process: agentlab.workers.process).

`execute(run_id, debug)` claims the run for this worker (its `Run.worker` becomes
`engine:<this process>#<claim>`, which the start-up sweep of traces.startup leaves to the
engine; the claim part tells this execution from any other, even in the same process), then
runs it fenced by that owner (agentlab.runs.writer: its rows and statuses are written only
while `Run.worker` still names this execution; this worker's lease is checked before each
step, agentlab.workers.lease), exactly as a web process would run it
(agentlab.runs.engine.start_here: a replay, fork or resume rebuilds its record from the
database; recorder, fanout, RunControl), its control group joined while it runs here. A
run that another worker had started (a retried job: that worker stopped) continues from its
trace (takeover.py). When the run has ended — also when a retried job finds it already over —
a run that answers an evaluation case is scored here, and its experiment advanced
(agentlab.evals.on_workers.settle).

A run whose job has been taken over more than MAX_TAKEOVERS times ends failed instead of
being executed once more: what it does stops every worker that executes it (a call that
stalls the loop for good), and each takeover would stop one more.

`serve()` (agentlab.workers.process) is what `manage.py worker` runs.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import Any

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.db import transaction
from django.utils import timezone

from agentlab.evals.on_workers import settle
from agentlab.runs import control as run_control
from agentlab.runs import engine
from agentlab.runs.recorder import FENCE, Recorder
from agentlab.runs.registry import REGISTRY
from agentlab.runs.writer import Fence
from agentlab.workers.lease import LEASE
from agentlab.workers.relay import RELAY
from agentlab.workers.takeover import plan_takeover
from traces.models import Run
from traces.owners import owner_id, process_id
from traces.schema import ACTIVE_STATUSES

log = logging.getLogger(__name__)

MAX_TAKEOVERS = 3  # executions of a run after the first that a job may start


@database_sync_to_async
def claim(run_id: int) -> tuple[Run, str | None] | None:
    """The run, now this worker's; with the worker it was taken from when another had started
    it (None for a queued run). None when the run is over (cancelled or swept meanwhile).

    A queued run gets its `started_at` here, with its row locked: a cancel of queued runs
    (agentlab.evals.on_workers.cancel_runs) takes only those without one, so it never marks
    cancelled a run a worker is already starting; either the cancel or the claim comes first."""
    with transaction.atomic():
        row = (Run.objects.select_for_update().filter(pk=run_id)
               .values("status", "worker").first())
        if row is None or row["status"] not in ACTIVE_STATUSES:
            return None
        started = {"started_at": timezone.now()} if row["status"] == "queued" else {}
        # This execution's own owner: a fence no other execution of the run shares.
        Run.objects.filter(pk=run_id).update(worker=f"{owner_id()}#{secrets.token_hex(4)}",
                                             **started)
    previous = row["worker"] if row["status"] != "queued" else None
    return Run.objects.select_related("user").get(pk=run_id), previous


async def execute(context: Any, run_id: int, debug: dict[str, Any] | None = None) -> None:
    """procrastinate's task body (registered in agentlab.workers.app)."""
    attempts = getattr(getattr(context, "job", None), "attempts", 0) or 0
    try:
        await _execute(run_id, debug, attempts)
    finally:
        await asyncio.shield(_settle(run_id))


async def _settle(run_id: int) -> None:
    try:
        await settle(run_id)
    except Exception:  # the run's record stands; its score is what is lost
        log.exception("run %s ended, but its evaluation could not be scored", run_id)


async def _execute(run_id: int, debug: dict[str, Any] | None, attempts: int = 0) -> None:
    claimed = await claim(run_id)
    if claimed is None:
        log.info("run %s is no longer active; nothing to execute", run_id)
        return
    run, previous = claimed
    lease = LEASE[0] if LEASE else None
    # Every recorder of the run (its steps, its statuses) is made in this task's context.
    FENCE.set(Fence(run.worker, check=lease.check, lost=lease.lost) if lease is not None
              else Fence(run.worker))
    if previous is not None and attempts > MAX_TAKEOVERS:
        await Recorder(run_id).status("failed", {"error": (
            f"the worker executing it stopped {attempts} times (the last was {previous}), "
            "so it is not taken over again; its trace shows how far it got")})
        return
    prepare = None
    if previous is not None:
        plan = await sync_to_async(plan_takeover)(run, by=process_id(), previous=previous)
        prepare = plan.prepare
        log.warning("run %s taken over from %s after step %s", run_id, previous,
                    plan.resume_after)
    settings_ = run_control.DebugSettings.from_frame(debug or {})
    # As in a web process: a replay, fork or resume rebuilds its record from the database.
    if await engine.start_here(run, settings_, prepare=prepare) is None:
        return  # it could not be prepared, and ended failed saying why
    task = REGISTRY.task(run_id)
    assert task is not None
    relay = RELAY[0] if RELAY else None
    if relay is not None:
        await relay.hold(run_id)
    try:
        # A worker stopped past its grace cancels the job, and with it the run: it ends
        # `cancelled`, recorded (SIGTERM gives the runs AGENTLAB_WORKER_GRACE_S to finish).
        await task
    finally:
        if relay is not None:
            await relay.release(run_id)
