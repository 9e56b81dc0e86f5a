"""The recorder's writer: one thread writes every run's rows, all that waits at once together.

Why one thread: SQLite takes one writer at a time, and writers in several threads wait for its
lock by sleeping (its busy handler sleeps up to 100 ms at a time). Why many rows at once: with
the event loop busy, each write the thread starts waits for the GIL, so twenty runs' steps
written one by one queue behind each other; written as one upsert in one transaction they cost
about what one did (measured by `manage.py bench_live`).

A batch keeps each run's order: jobs are taken in the order they were handed over, and a
run's steps are written before its status. Two versions of one step in a batch (a `running`
version its run did not wait for, then its end) are one row: the later. If a batch fails, each
job is tried on its own, so one bad row (its run deleted meanwhile) fails alone and its caller
hears why. `retry_later` keeps a write that nothing could do now (the recorder's last resort
for a run's end) and tries it after the next batch that commits, up to RETRY_LATER_TRIES times.

A run a worker executes is *fenced* (its recorder's `fence`, agentlab.workers.job): its rows
are written only while `Run.worker` still names this execution (traces.upsert), so a worker
whose run was taken over meanwhile (its event loop stalled past the takeover time) never
writes a step over the new owner's. Such a refused row fails with `TakenOver`, and the fence
hears it at once, from this thread (`Fence.lost`: a worker stops there).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from django.db import connection, transaction

from traces.models import Run
from traces.schema import Step as StepRecord
from traces.upsert import (
    ROWS_PER_STATEMENT,
    add_step_counts,
    counts_in_statement,
    upsert_steps,
)

log = logging.getLogger(__name__)

RETRY_LATER_TRIES = 20


class TakenOver(Exception):
    """The run is no longer this execution's: another worker took it over (`Run.worker`
    names another owner). Nothing of this execution is written from then on."""


@dataclass(frozen=True)
class Fence:
    """What a run's writes are conditional on, and whom to tell when they are refused."""

    owner: str  # the value of `Run.worker` while this execution owns the run
    # Called before each step the run records: raises (or stops the process) when this
    # execution may have lost the run already (a worker's lease, agentlab.workers.lease).
    check: Callable[[], None] = lambda: None
    # Called (from any thread) when a write found the run another's; may not return.
    lost: Callable[[int, str], None] = lambda run_id, why: None


class Owner(Protocol):
    """The recorder a step comes from: which of its run's seqs already have a row, and the
    fence its writes are conditional on (None: none)."""

    run_id: int
    fence: Fence | None

    def saved(self) -> set[int]: ...


def _fence(owner: Owner) -> Fence | None:
    return getattr(owner, "fence", None)


def taken_over(run_id: int, fence: Fence) -> TakenOver | None:
    """A TakenOver when the run exists and `Run.worker` is no longer the fence's owner (the
    fence is told); None when it is still this execution's (or the run is gone)."""
    worker = Run.objects.filter(pk=run_id).values_list("worker", flat=True).first()
    if worker is None or worker == fence.owner:
        return None
    why = f"run {run_id} was taken over by {worker} (this execution is {fence.owner})"
    fence.lost(run_id, why)
    return TakenOver(why)


@dataclass
class StepJob:
    owner: Owner
    record: StepRecord
    # Called on the caller's loop once the row is committed (or failed), before the caller's
    # future is settled and in the same turn: the recorder publishes from it. Its second
    # argument: a later version of the row came in the same batch and was written instead.
    then: Callable[[BaseException | None, bool], None] | None = None
    superseded: bool = False


@dataclass
class CallJob:
    fn: Any
    args: tuple[Any, ...]


Job = StepJob | CallJob


class Writer:
    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Job, asyncio.AbstractEventLoop, asyncio.Future]]
        self._queue = queue.SimpleQueue()
        self._started = False
        self._lock = threading.Lock()
        self._later: list[tuple[Any, tuple[Any, ...], int]] = []  # (fn, args, tries so far)

    def step(self, owner: Owner, record: StepRecord,
             then: Callable[[BaseException | None, bool], None] | None = None,
             ) -> asyncio.Future[None]:
        """Upsert a step's row (by run and seq); `then(error or None, superseded)` runs on the
        caller's loop once it is done."""
        return self._submit(StepJob(owner, record, then))

    def call(self, fn: Any, *args: Any) -> asyncio.Future[Any]:
        """Run `fn(*args)` on the writer thread, after everything submitted before it."""
        return self._submit(CallJob(fn, args))

    def retry_later(self, fn: Any, *args: Any) -> None:
        """Run `fn(*args)` in a transaction of its own after the next batch that commits
        (the database writes again), retried there until it succeeds or runs out of tries."""
        with self._lock:
            self._later.append((fn, args, 0))

    def _submit(self, job: Job) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queue.put((job, loop, future))
        if not self._started:
            with self._lock:
                if not self._started:
                    threading.Thread(target=self._run, name="agentlab-recorder",
                                     daemon=True).start()
                    self._started = True
        return future

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            with contextlib.suppress(queue.Empty):
                while True:
                    batch.append(self._queue.get_nowait())
            try:
                outcomes = self._write([job for job, _loop, _future in batch])
            except BaseException as exc:  # the thread must survive anything
                log.exception("the recorder's writer failed a batch")
                outcomes = [exc] * len(batch)
            # One hand-over per loop, not per job: each wakes the loop and waits for its turn.
            by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Job, asyncio.Future, Any]]] = {}
            for (job, loop, future), outcome in zip(batch, outcomes, strict=True):
                by_loop.setdefault(loop, []).append((job, future, outcome))
            for loop, settled in by_loop.items():
                with contextlib.suppress(RuntimeError):  # its loop is gone: nobody waits
                    loop.call_soon_threadsafe(_settle_all, settled)
            if self._later and not all(isinstance(o, BaseException) for o in outcomes):
                self._retry_later()

    def _retry_later(self) -> None:
        with self._lock:
            pending, self._later = self._later, []
        for fn, args, tries in pending:
            try:
                with transaction.atomic():
                    fn(*args)
            except Exception:
                connection.close()
                if tries + 1 < RETRY_LATER_TRIES:
                    with self._lock:
                        self._later.append((fn, args, tries + 1))
                else:
                    log.exception("gave up after %d tries: %s%r", tries + 1,
                                  getattr(fn, "__name__", fn), args)

    def _write(self, jobs: list[Job]) -> list[Any]:
        """Each job's outcome; if the batch fails, each job is tried on its own."""
        try:
            return _committed(jobs)
        except Exception as exc:
            connection.close()  # whatever broke, the next transaction starts on a fresh one
            if len(jobs) == 1:
                return [_why_refused(jobs[0], exc)]
        return [self._write([job])[0] for job in jobs]


def _why_refused(job: Job, exc: Exception) -> Exception:
    """A fenced row refused because its run was taken over: TakenOver; else `exc`."""
    fence = _fence(job.owner) if isinstance(job, StepJob) else None
    if fence is None:
        return exc
    try:
        return taken_over(job.owner.run_id, fence) or exc
    except Exception:  # the database is down: the first error is the one that counts
        connection.close()
        return exc


def _committed(jobs: list[Job]) -> list[Any]:
    if _one_statement(jobs):  # atomic by itself: no BEGIN and COMMIT to wait for
        outcomes, rows = _write_together(jobs)
    else:
        with transaction.atomic():
            outcomes, rows = _write_together(jobs)
    for job in rows:  # only once committed: a rolled-back row is still new next time
        job.owner.saved().add(job.record.seq)
    return outcomes


def _write_together(jobs: list[Job]) -> tuple[list[Any], list[StepJob]]:
    # One row per (run, seq), its latest version: an earlier one (a step's "running" version,
    # which its run did not wait for) is superseded by the version after it in the same batch.
    latest: dict[tuple[int, int, str | None], StepJob] = {}
    for job in jobs:
        if isinstance(job, StepJob):
            job.superseded = False  # afresh: a failed batch is tried again job by job
            # Two executions of one run in one process (the first was taken over) are two
            # rows, so that the one that is not the run's any more is refused, not superseded.
            fence = _fence(job.owner)
            key = (job.owner.run_id, job.record.seq, fence.owner if fence else None)
            if (earlier := latest.pop(key, None)) is not None:
                earlier.superseded = True
            latest[key] = job
    steps = list(latest.values())
    fences = [fence.owner if (fence := _fence(j.owner)) is not None else None for j in steps]
    rows = ((j.owner.run_id, j.record) for j in steps)
    # Fenced rows (a worker's runs) are written only while the run is still theirs.
    if not (upsert_steps(rows, fences) if any(fences) else upsert_steps(rows)):
        # Only a run's own recorder writes its steps, so it knows which seqs are new rows.
        add_step_counts(Counter(j.owner.run_id for j in steps
                                if j.record.seq not in j.owner.saved()))
    # Calls (statuses) after the steps: a run's status follows its steps.
    outcomes = [job.fn(*job.args) if isinstance(job, CallJob) else None for job in jobs]
    return outcomes, steps


def _one_statement(jobs: list[Job]) -> bool:
    """Steps only, few enough for one statement that also counts them (PostgreSQL)."""
    return (counts_in_statement() and all(isinstance(job, StepJob) for job in jobs)
            and len(jobs) <= ROWS_PER_STATEMENT)


def _settle_all(settled: list[tuple[Job, asyncio.Future[Any], Any]]) -> None:
    for job, future, outcome in settled:
        failed = outcome if isinstance(outcome, BaseException) else None
        if isinstance(job, StepJob) and job.then is not None:
            try:
                job.then(failed, job.superseded)
            except Exception:  # publishing must never keep the run from its row's outcome
                log.exception("after writing step %s of run %s", job.record.seq,
                              job.owner.run_id)
        if future.done():
            continue
        if failed is not None:
            future.set_exception(failed)
        else:
            future.set_result(outcome)


WRITER = Writer()
