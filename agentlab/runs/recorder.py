"""Steps -> rows, then -> the run's watchers: persist first, publish second (DESIGN.md).

How, and why (measured by `manage.py bench_live`): the process's one writer thread writes every
run's rows, all that wait at once in one transaction (agentlab/runs/writer.py). A run waits for a
finished step's row — so what it recorded survives the process — unless no other run waits
for the CPU (then waiting only idles it: the rows are waited for before its next tool call, at
most MAX_AHEAD behind, and before its status); never for a `running` version (its end follows
at once; in one batch only the end is written and shown), nor for the publishing.

Publishing follows in the run's order (tokens after the step they belong to) and happens in
the loop turn the row is committed: this process's sockets are called directly
(agentlab/runs/fanout.py); the channel layer carries the events only to other processes. A
run's lane (its events in order) lives in its entry of the run registry (agentlab/runs/registry.py)
while anything waits in it. A status
waits until everything before it is published, so a final status never overtakes a step.

A run always ends with an honest status. The steps the runtime writes while a run ends (its
`final` step, the `error` step with the run's status, steps closed as `unfinished`) are retried
and, if still unwritten, logged instead of raised, so the run goes on to its status; a run
that lost any row ends `failed` (never `succeeded`), saying how many and why. A finished
status is written with retries (STATUS_RETRY_DELAYS_S, each failure logged); if it still
cannot be, the run is marked `failed` on a fresh connection from another thread, and if even
that fails the writer tries again after its next successful batch. A process that dies
leaves its runs to the next process that starts (traces.startup).

A run a worker executes is fenced (`FENCE`, set by agentlab.workers.job for the run's task and
read by each recorder made in it): its rows and statuses are written only while `Run.worker`
still names this execution, and before each step the fence checks that this worker's lease
is still good. A run taken over by another worker (this one's loop stalled past the takeover
time) raises `TakenOver` instead of writing; nothing is retried or marked failed then: the run
is the new owner's to end.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import deque
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.utils import timezone

from agentlab.runs import fanout
from agentlab.runs.registry import REGISTRY
from agentlab.runs.writer import WRITER, Fence, TakenOver, taken_over
from traces import startup
from traces.models import Run
from traces.owners import owner_id
from traces.schema import ACTIVE_STATUSES, FINISHED_STATUSES, RUN_TOTALS
from traces.schema import Step as StepRecord
from traces.startup import mark_interrupted  # noqa: F401  (its old home; serve and tests)

log = logging.getLogger(__name__)

STATUS_RETRY_DELAYS_S = (0.2, 1.0, 3.0)  # after the first try of a status write
CLOSING_RETRY_DELAYS_S = (0.2, 1.0)  # after the first try of a closing step's row

# The fence of the runs started in this context (a worker's job sets it; None elsewhere).
FENCE: ContextVar[Fence | None] = ContextVar("agentlab_run_fence", default=None)


def save_status(run_id: int, status: str, detail: dict[str, Any], *,
                fence: Fence | None = None) -> None:
    """Write a status to the run's row: what the writer thread runs for `Recorder.status`.
    Public as the seam where a status write happens: tests call it in their own thread (mutation
    testing sees only that thread) and break it on purpose, as a database refusing it would.
    With a `fence`, only while `Run.worker` is its owner (else TakenOver)."""
    fields: dict[str, Any] = {"status": status}
    now = timezone.now()
    rows = Run.objects.filter(pk=run_id)
    if fence is not None:
        rows = rows.filter(worker=fence.owner)  # its owner stays: it names this execution
    elif status == "running":
        fields |= {"worker": owner_id()}
    if status == "running":
        rows.filter(started_at__isnull=True).update(started_at=now)
    if status in FINISHED_STATUSES:
        fields["finished_at"] = now
    if "answer" in detail:
        fields["final_answer"] = detail["answer"] or ""
    if "error" in detail:
        fields["error"] = detail["error"] or ""
    for key in RUN_TOTALS:
        if key in detail.get("totals", {}):
            fields[key] = detail["totals"][key]
    if not rows.update(**fields) and fence is not None and (
            lost := taken_over(run_id, fence)) is not None:
        raise lost


def mark_failed(run_id: int, status: str, reason: str, *, fence: Fence | None = None) -> int:
    """The last resort when a run's final status cannot be written: the fewest columns, and
    only if the run is still active (and, with a `fence`, still its owner's); how many runs it
    marked. Public for the same reason as `save_status`."""
    rows = Run.objects.filter(pk=run_id, status__in=ACTIVE_STATUSES)
    if fence is not None:
        rows = rows.filter(worker=fence.owner)
    return rows.update(
        status="failed", finished_at=timezone.now(),
        error=f"Its end ({status}) could not be recorded, so its answer and totals are not "
              f"stored: {reason}")


def _on_own_connection(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` in the calling (worker) thread, on a connection closed afterwards: not the
    writer thread's, which may be the one that is broken."""
    try:
        return fn(*args)
    finally:
        connection.close()


def _closing(record: dict[str, Any]) -> bool:
    """A step the runtime writes while the run ends (agentlab.runtime.loop.execute and
    RunContext.close_open_steps): the run must still reach its status after it."""
    meta = record.get("meta") or {}
    return (record["kind"] == "final" or "unfinished" in meta
            or (record["kind"] == "error" and "status" in meta))


@dataclass
class _Entry:
    message: dict[str, Any] | None  # None: its row could not be written, so it is not shown
    ready: bool


class _Lane:
    """One run's events in the order they were handed over (shared by every recorder of the
    run): a step waits at its place until its row is written, tokens and approvals behind it."""

    def __init__(self, run_id: int, loop: asyncio.AbstractEventLoop) -> None:
        self.run_id, self.loop = run_id, loop
        self.entries: deque[_Entry] = deque()
        self.idle: asyncio.Future[None] | None = None  # for status(): resolved once drained

    def push(self, message: dict[str, Any], *, ready: bool) -> _Entry:
        entry = _Entry(message, ready)
        self.entries.append(entry)
        if ready:
            self.flush()
        return entry

    def flush(self) -> None:
        """Publish every ready event at the head, in order (synchronous: no loop turn)."""
        while self.entries and self.entries[0].ready:
            message = self.entries.popleft().message
            if message is not None:
                fanout.publish(self.run_id, message)
        if not self.entries:
            REGISTRY.clear(self.run_id, "lane", only=self)
            if self.idle is not None and not self.idle.done():
                self.idle.set_result(None)

    async def drained(self) -> None:
        while self.entries:
            if self.idle is None or self.idle.done():
                self.idle = self.loop.create_future()
            await asyncio.shield(self.idle)


def _lane(run_id: int) -> _Lane:
    """The run's lane (in its registry entry while anything waits to be published)."""
    loop = asyncio.get_running_loop()
    entry = REGISTRY.hold(run_id)
    lane = entry.lane
    if lane is None or lane.loop is not loop:  # a lane left by a loop that is gone (tests)
        lane = entry.lane = _Lane(run_id, loop)
    return lane


MAX_AHEAD = 8  # finished rows a run may have handed over without waiting for them


def _written_ok(future: asyncio.Future[None]) -> bool:
    return future.done() and not future.cancelled() and future.exception() is None


def _quiet(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()  # retrieved: a failed row fails the step's next version too


class Recorder:
    """The StepSink of one run: each step is upserted by seq, then published; the run's totals
    follow with its statuses. `publish=False` writes the rows only.

    `ahead`, asked at each finished step: may the run go on before the row is written? Then
    the row is waited for at the latest by `durable()` — before the run calls a tool, when
    MAX_AHEAD rows wait, and before its status — so a crash can lose only the last steps before
    a model call, never what led to a tool's effects. The runner says yes when no other run
    waits for the CPU (agentlab.runtime.slots.free): waiting for the row then only idles."""

    def __init__(self, run_id: int, *, publish: bool = True,
                 ahead: Callable[[], bool] | None = None) -> None:
        self.run_id = run_id
        self.publishing = publish
        self.ahead = ahead
        self._versions: dict[int, int] = {}
        self._saved: set[int] = set()  # seqs with a row (touched by the writer thread only)
        self._unwritten: list[asyncio.Future[None]] = []  # finished rows not yet waited for
        self._lost: list[str] = []  # rows that could not be written: why
        self.fence = FENCE.get()  # a worker's run: written only while it is still its own

    async def step(self, step: StepRecord) -> None:
        written_row, record, message = self._hand_over(step)
        if step.status == "running":  # its end follows: the run waits for that one
            written_row.add_done_callback(_quiet)
            return
        if _closing(record):
            await self._write_closing(written_row, record, message)
            return
        if self.ahead is not None and self.ahead():
            written_row.add_done_callback(_quiet)
            self._unwritten = [f for f in self._unwritten if not _written_ok(f)]
            self._unwritten.append(written_row)
            if len(self._unwritten) >= MAX_AHEAD:
                await self.durable()
            return
        try:
            await written_row
        except TakenOver:
            raise
        except Exception as exc:
            self._lost.append(f"step {step.seq} ({step.kind}): {exc}")
            raise

    def running(self, step: StepRecord) -> None:
        """Hand over a `running` version now, from synchronous code (a timer), never waited
        for: its end follows, and the run waits for that one."""
        assert step.status == "running"
        self._hand_over(step)[0].add_done_callback(_quiet)

    def _hand_over(self, step: StepRecord
                   ) -> tuple[asyncio.Future[None], dict[str, Any], dict[str, Any] | None]:
        if self.fence is not None:
            self.fence.check()  # a worker whose lease lapsed goes no further (TakenOver)
        recorded_at = time.time()
        record = step.to_dict()  # a deep copy: the run may change its dicts after this
        # version: which emission of this seq (consumers render each version once per process);
        # recorded_at / sent_at (epoch s: handed over / row written) measure publish latency.
        version = self._versions[step.seq] = self._versions.get(step.seq, 0) + 1
        message = None
        if self.publishing:
            message = {"type": "run.step", "seq": step.seq, "step": record,
                       "version": version, "recorded_at": recorded_at}
        # The row, from the same copy; a row that cannot be written fails the run's step.
        return self._write(record, message), record, message

    def _write(self, record: dict[str, Any], message: dict[str, Any] | None
               ) -> asyncio.Future[None]:
        """Hand the row to the writer; `message` (if publishing) is published once it is
        committed, in the run's order."""
        if message is None:
            return WRITER.step(self, StepRecord(**record))
        lane = _lane(self.run_id)
        entry = lane.push(message, ready=False)

        def written(error: BaseException | None, superseded: bool) -> None:  # once committed
            if error is None and not superseded:
                message["sent_at"] = time.time()
            else:  # failed: the run is told by the future; what is not in the trace is not
                entry.message = None  # shown. Superseded: the version after it is.
            entry.ready = True
            lane.flush()

        return WRITER.step(self, StepRecord(**record), then=written)

    async def _write_closing(self, first: asyncio.Future[None], record: dict[str, Any],
                             message: dict[str, Any] | None) -> None:
        """Wait for a closing step's row, retrying; never raises: the run must reach its
        status, which then says that the trace is incomplete."""
        attempt: asyncio.Future[None] = first
        for delay in (*CLOSING_RETRY_DELAYS_S, None):
            try:
                await attempt
                return
            except TakenOver:
                raise  # the new owner ends the run
            except Exception as exc:
                error = exc
            if delay is None:
                break
            log.warning("run %s: the row of its %s step %s failed (%s); retrying in %g s",
                        self.run_id, record["kind"], record["seq"], error, delay)
            await asyncio.sleep(delay)
            attempt = self._write(record, dict(message) if message else None)
        log.error("run %s: the row of its %s step %s could not be written: %s",
                  self.run_id, record["kind"], record["seq"], error)
        self._lost.append(f"step {record['seq']} ({record['kind']}): {error}")

    async def durable(self) -> None:
        """Wait for every finished step's row not waited for yet; raises the first that could
        not be written (as waiting for it at once would have)."""
        pending, self._unwritten = self._unwritten, []
        for future in pending:
            await future

    async def token(self, seq: int, delta: str) -> None:
        self.publish({"type": "run.token", "seq": seq, "delta": delta})

    async def status(self, status: str, detail: dict[str, Any]) -> None:
        if not startup.swept():  # the first run of this process: close what dead ones left
            await asyncio.to_thread(_on_own_connection, startup.sweep_once)
        try:
            await self.durable()
        except TakenOver:
            raise  # not ours to end: the worker that took it over ends it
        except Exception as exc:  # the run is ending either way; its status must still be written
            log.exception("run %s: a step's row could not be written", self.run_id)
            self._lost.append(f"a step written ahead: {exc}")
        await self.flush()
        if self._lost and status in FINISHED_STATUSES:
            status, detail = self._incomplete(status, detail)
        await self._save(status, detail)
        self.publish({"type": "run.status", "status": status, "detail": detail})

    def _incomplete(self, status: str, detail: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """A run whose trace lost rows never ends `succeeded`; its error says what is missing."""
        note = (f"{len(self._lost)} row(s) of this run could not be recorded, so its trace is "
                f"incomplete; the first: {self._lost[0]}")
        error = f"{detail['error']} ({note})" if detail.get("error") else note
        return ("failed" if status == "succeeded" else status), {**detail, "error": error}

    async def _save(self, status: str, detail: dict[str, Any]) -> None:
        """Write the status, retrying; a finished one that still cannot be written is marked
        failed by whatever can still write. A non-final one that fails raises."""
        error: Exception | None = None
        for attempt, delay in enumerate((0.0, *STATUS_RETRY_DELAYS_S), start=1):
            if delay:
                await asyncio.sleep(delay)
            try:
                if self.fence is None:
                    await WRITER.call(save_status, self.run_id, status, detail)
                else:
                    await WRITER.call(functools.partial(save_status, fence=self.fence),
                                      self.run_id, status, detail)
                return
            except TakenOver:
                raise  # neither retried nor marked failed: the run is another worker's now
            except Exception as exc:
                error = exc
                log.warning("run %s: writing its status %r failed (try %d of %d): %s",
                            self.run_id, status, attempt, 1 + len(STATUS_RETRY_DELAYS_S), exc)
        assert error is not None
        if status not in FINISHED_STATUSES:
            raise error
        log.error("run %s: its status %r could not be written; marking it failed instead",
                  self.run_id, status)
        reason = f"{type(error).__name__}: {error}"
        mark = (mark_failed if self.fence is None
                else functools.partial(mark_failed, fence=self.fence))
        try:
            await asyncio.to_thread(_on_own_connection, mark, self.run_id, status, reason)
        except Exception:
            log.exception("run %s: could not mark it failed either; the writer tries again "
                          "after its next write", self.run_id)
            WRITER.retry_later(mark, self.run_id, status, reason)

    def publish(self, message: dict[str, Any]) -> None:
        """Publish `message` after every step handed over before it (at once if none waits)."""
        if self.publishing:
            _lane(self.run_id).push(message, ready=True)

    async def flush(self) -> None:
        """Wait until everything handed over so far is published."""
        entry = REGISTRY.entry(self.run_id)
        if entry is not None and entry.lane is not None:
            await entry.lane.drained()

    def saved(self) -> set[int]:  # for the writer (agentlab.runs.writer.Owner)
        return self._saved
