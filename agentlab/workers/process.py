"""A worker process, what `manage.py worker` runs: procrastinate's worker (one event loop,
up to `concurrency` runs at once), its heartbeat from a thread of its own that stops the
process when the loop stalls for good or the lease lapses (agentlab.workers.lease), the
control relay, and the sweep
that hands the jobs of a worker silent for AGENTLAB_TAKEOVER_S back to the queue
(procrastinate's `get_stalled_jobs` + `retry_job`), so another worker takes them over, and
gives a job to any engine run queued without one (`queue_orphans`).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils import timezone
from procrastinate.exceptions import AlreadyEnqueued
from procrastinate.worker import Worker

from agentlab.workers.app import QUEUE, conninfo, run_job, run_lock, worker_app
from agentlab.workers.lease import HEARTBEAT_S, LEASE, Lease
from agentlab.workers.relay import RELAY, Relay
from traces import startup
from traces.models import Run
from traces.owners import WORKER_PREFIX, become_worker, process_id

log = logging.getLogger(__name__)

ORPHANS_PER_SWEEP = 100


async def hand_back_stalled(app: Any) -> None:
    """Every second: the jobs of workers silent for AGENTLAB_TAKEOVER_S go back to the queue,
    and engine runs left without a job get one (`queue_orphans`)."""
    while True:
        await asyncio.sleep(HEARTBEAT_S)
        try:
            stalled = await app.job_manager.get_stalled_jobs(
                seconds_since_heartbeat=settings.AGENTLAB_TAKEOVER_S)
            for job in stalled:
                log.warning("job %s (run %s) of a silent worker goes back to the queue",
                            job.id, job.task_kwargs.get("run_id"))
                await app.job_manager.retry_job(job)
            await queue_orphans(app)
        except asyncio.CancelledError:
            raise
        except Exception:  # another worker retried it first, or the database blinked
            log.debug("the stalled-job sweep failed this time", exc_info=True)


async def queue_orphans(app: Any) -> list[int]:
    """Runs queued for the engine whose job was never deferred — the process that created them
    (an experiment advancing) stopped between saving them and queueing them, or the database
    refused the job — get their job now, once they are AGENTLAB_TAKEOVER_S old: without it,
    nothing would ever execute them, and their experiment would wait for ever. Returns them."""
    queued = await sync_to_async(_stale_engine_runs)()
    deferred = []
    for run_id in queued:
        if await app.job_manager.list_jobs_async(lock=run_lock(run_id)):
            continue  # queued, executing or over: its job is the engine's business
        try:
            await run_job(app, run_id).defer_async(run_id=run_id, debug={})
        except AlreadyEnqueued:
            continue  # another worker's sweep got there first
        log.warning("run %s was queued without a job; its job is queued now", run_id)
        deferred.append(run_id)
    return deferred


def _stale_engine_runs() -> list[int]:
    since = timezone.now() - timedelta(seconds=settings.AGENTLAB_TAKEOVER_S)
    return list(Run.objects.filter(status="queued", worker__startswith=WORKER_PREFIX,
                                   started_at__isnull=True, created__lt=since)
                .order_by("pk").values_list("pk", flat=True)[:ORPHANS_PER_SWEEP])


class _Worker(Worker):
    """procrastinate's worker, which tells the lease when it is asked to stop (its row goes
    then, which is no loss)."""

    lease: Lease | None = None

    def stop(self) -> None:
        if self.lease is not None:
            self.lease.stopping = True
        super().stop()


async def serve(concurrency: int) -> None:
    """One worker process: runs until SIGTERM/SIGINT, then finishes the runs it holds (for at
    most AGENTLAB_WORKER_GRACE_S) and exits."""
    become_worker()  # its runs' owner is "engine:…": the engine recovers them
    await sync_to_async(startup.sweep_once)()
    app = worker_app()
    async with app.open_async():
        relay = await Relay().start()
        RELAY[:] = [relay]
        sweeper = asyncio.get_running_loop().create_task(hand_back_stalled(app))
        worker = _Worker(
            app=app, queues=[QUEUE], concurrency=concurrency, name=process_id(),
            update_heartbeat_interval=HEARTBEAT_S,
            stalled_worker_timeout=settings.AGENTLAB_TAKEOVER_S,
            fetch_job_polling_interval=1.0,
            shutdown_graceful_timeout=settings.AGENTLAB_WORKER_GRACE_S)
        # The heartbeat that counts is the lease's thread's (procrastinate's own, on the loop,
        # goes on too): a stalled loop is not a dead worker.
        lease = worker.lease = Lease(
            conninfo(), worker,
            takeover_s=settings.AGENTLAB_TAKEOVER_S,
            stall_s=settings.AGENTLAB_WORKER_STALL_S).start()
        LEASE[:] = [lease]
        try:
            await worker.run()
        finally:
            lease.stop()
            LEASE.clear()
            sweeper.cancel()
            await relay.stop()
            RELAY.clear()
