"""The recorder's writer: one thread writes every run's rows, all that waits at once together.

Why one thread: SQLite takes one writer at a time, and writers in several threads wait for its
lock by sleeping (its busy handler sleeps up to 100 ms at a time). Why many rows at once: with
the event loop busy, each write the thread starts waits for the GIL, so twenty runs' steps
written one by one queue behind each other; written as one upsert in one transaction they cost
about what one did (measured by `manage.py bench_live`).

A batch keeps each run's order: its steps are written before its status (a run waits for its
writes, so its own jobs are never out of order). If a batch fails, each job is tried on its
own, so one bad row (its run deleted meanwhile) fails alone and its caller hears why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any, Protocol

from django.db import connection, transaction
from django.db.models import F

from traces.models import Run, Step
from traces.schema import Step as StepRecord

log = logging.getLogger(__name__)

# An upsert rewrites every column but its key.
UPDATE_FIELDS = [f.name for f in Step._meta.concrete_fields if f.name not in ("id", "run", "seq")]


class Owner(Protocol):
    """The recorder a step comes from: which of its run's seqs already have a row."""

    run_id: int

    def saved(self) -> set[int]: ...


@dataclass
class StepJob:
    owner: Owner
    record: StepRecord


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

    def step(self, owner: Owner, record: StepRecord) -> asyncio.Future[None]:
        """Upsert a step's row (by run and seq)."""
        return self._submit(StepJob(owner, record))

    def call(self, fn: Any, *args: Any) -> asyncio.Future[Any]:
        """Run `fn(*args)` on the writer thread, after everything submitted before it."""
        return self._submit(CallJob(fn, args))

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
            for (_job, loop, future), outcome in zip(batch, outcomes, strict=True):
                with contextlib.suppress(RuntimeError):  # its loop is gone: nobody waits
                    loop.call_soon_threadsafe(_settle, future, outcome)

    def _write(self, jobs: list[Job]) -> list[Any]:
        try:
            return _committed(jobs)
        except Exception as exc:
            connection.close()  # whatever broke, the next transaction starts on a fresh one
            if len(jobs) == 1:
                return [exc]
        return [self._write_alone(job) for job in jobs]

    def _write_alone(self, job: Job) -> Any:
        try:
            return _committed([job])[0]
        except Exception as exc:
            connection.close()
            return exc


def _committed(jobs: list[Job]) -> list[Any]:
    with transaction.atomic():
        outcomes, rows = _write_together(jobs)
    for job in rows:  # only once committed: a rolled-back row is still new next time
        job.owner.saved().add(job.record.seq)
    return outcomes


def _write_together(jobs: list[Job]) -> tuple[list[Any], list[StepJob]]:
    # One row per (run, seq): a run waits for each write, so a batch holds one version of each.
    steps = [job for job in jobs if isinstance(job, StepJob)]
    if steps:
        Step.objects.bulk_create(
            [Step.from_record(j.owner.run_id, j.record) for j in steps], update_conflicts=True,
            unique_fields=["run", "seq"], update_fields=UPDATE_FIELDS)
        # Only a run's own recorder writes its steps, so it knows which seqs are new rows.
        new = Counter(j.owner.run_id for j in steps if j.record.seq not in j.owner.saved())
        for run_id, count in new.items():
            Run.objects.filter(pk=run_id).update(step_count=F("step_count") + count)
    # Calls (statuses) after the steps: a run's status follows its steps.
    outcomes = [job.fn(*job.args) if isinstance(job, CallJob) else None for job in jobs]
    return outcomes, steps


def _settle(future: asyncio.Future[Any], outcome: Any) -> None:
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


WRITER = Writer()
