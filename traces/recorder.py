"""Steps -> rows, then -> the run's watchers: persist first, publish second (DESIGN.md).

How, and why (measured by `manage.py bench_live`): the process's one writer thread writes every
run's rows, all that wait at once in one transaction (traces/writer.py). A run waits for a
finished step's row — so what it recorded survives the process — unless no other run waits
for the CPU (then waiting only idles it: the rows are waited for before its next tool call, at
most MAX_AHEAD behind, and before its status); never for a `running` version (its end follows
at once; in one batch only the end is written and shown), nor for the publishing.

Publishing follows in the run's order (tokens after the step they belong to) and happens in
the loop turn the row is committed: this process's sockets are called directly
(traces/fanout.py); the channel layer carries the events only to other processes. A status
waits until everything before it is published, so a final status never overtakes a step.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from traces import fanout
from traces.models import Run
from traces.schema import ACTIVE_STATUSES, FINISHED_STATUSES
from traces.schema import Step as StepRecord
from traces.workers import left_by_dead_process, worker_id
from traces.writer import WRITER

log = logging.getLogger(__name__)



def _save_status(run_id: int, status: str, detail: dict[str, Any]) -> None:
    fields: dict[str, Any] = {"status": status}
    now = timezone.now()
    if status == "running":
        fields |= {"worker": worker_id()}
        Run.objects.filter(pk=run_id, started_at__isnull=True).update(started_at=now)
    if status in FINISHED_STATUSES:
        fields["finished_at"] = now
    if "answer" in detail:
        fields["final_answer"] = detail["answer"] or ""
    if "error" in detail:
        fields["error"] = detail["error"] or ""
    for key in ("llm_calls", "tool_calls", "tokens_in", "tokens_out", "cost_usd", "wall_ms",
                "format_errors", "reflections"):
        if key in detail.get("totals", {}):
            fields[key] = detail["totals"][key]
    Run.objects.filter(pk=run_id).update(**fields)


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
            if _LANES.get(self.run_id) is self:
                del _LANES[self.run_id]
            if self.idle is not None and not self.idle.done():
                self.idle.set_result(None)

    async def drained(self) -> None:
        while self.entries:
            if self.idle is None or self.idle.done():
                self.idle = self.loop.create_future()
            await asyncio.shield(self.idle)


_LANES: dict[int, _Lane] = {}  # run id -> its lane, while anything waits to be published


def _lane(run_id: int) -> _Lane:
    loop = asyncio.get_running_loop()
    lane = _LANES.get(run_id)
    if lane is None or lane.loop is not loop:  # a lane left by a loop that is gone (tests)
        lane = _LANES[run_id] = _Lane(run_id, loop)
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

    async def step(self, step: StepRecord) -> None:
        recorded_at = time.time()
        record = step.to_dict()  # a deep copy: the run may change its dicts after this
        # version: which emission of this seq (consumers render each version once per process);
        # recorded_at / sent_at (epoch s: handed over / row written) measure publish latency.
        version = self._versions[step.seq] = self._versions.get(step.seq, 0) + 1
        if not self.publishing:
            await WRITER.step(self, StepRecord(**record))
            return
        message = {"type": "run.step", "seq": step.seq, "step": record, "version": version,
                   "recorded_at": recorded_at}
        lane = _lane(self.run_id)
        entry = lane.push(message, ready=False)

        def written(error: BaseException | None, superseded: bool) -> None:  # once committed
            if error is None and not superseded:
                message["sent_at"] = time.time()
            else:  # failed: the run is told by the future; what is not in the trace is not
                entry.message = None  # shown. Superseded: the version after it is.
            entry.ready = True
            lane.flush()

        # The row, from the same copy; a row that cannot be written fails the run's step.
        written_row = WRITER.step(self, StepRecord(**record), then=written)
        if step.status == "running":  # its end follows: the run waits for that one
            written_row.add_done_callback(_quiet)
            return
        if self.ahead is not None and self.ahead():
            written_row.add_done_callback(_quiet)
            self._unwritten = [f for f in self._unwritten if not _written_ok(f)]
            self._unwritten.append(written_row)
            if len(self._unwritten) >= MAX_AHEAD:
                await self.durable()
            return
        await written_row

    async def durable(self) -> None:
        """Wait for every finished step's row not waited for yet; raises the first that could
        not be written (as waiting for it at once would have)."""
        pending, self._unwritten = self._unwritten, []
        for future in pending:
            await future

    async def token(self, seq: int, delta: str) -> None:
        self.publish({"type": "run.token", "seq": seq, "delta": delta})

    async def status(self, status: str, detail: dict[str, Any]) -> None:
        try:
            await self.durable()
        except Exception:  # the run is ending either way; its status must still be written
            log.exception("run %s: a step's row could not be written", self.run_id)
        await self.flush()
        await WRITER.call(_save_status, self.run_id, status, detail)
        self.publish({"type": "run.status", "status": status, "detail": detail})

    def publish(self, message: dict[str, Any]) -> None:
        """Publish `message` after every step handed over before it (at once if none waits)."""
        if self.publishing:
            _lane(self.run_id).push(message, ready=True)

    async def flush(self) -> None:
        """Wait until everything handed over so far is published."""
        if (lane := _LANES.get(self.run_id)) is not None:
            await lane.drained()

    def saved(self) -> set[int]:  # for the writer (traces.writer.Owner)
        return self._saved


def mark_interrupted(host: str | None = None) -> int:
    """Runs left active by a dead process on this host become `interrupted`; returns the count."""
    host = host or socket.gethostname()
    dead = [run.pk for run in Run.objects.active().filter(worker__startswith=f"{host}:")
            .only("pk", "worker") if left_by_dead_process(run.worker, host)]
    # Queued runs with no worker at all were never picked up by anyone.
    dead += list(Run.objects.filter(status="queued", worker="").values_list("pk", flat=True))
    return Run.objects.filter(pk__in=dead, status__in=ACTIVE_STATUSES).update(
        status="interrupted",
        error="The process running this run stopped before it finished; resume it as a fork.",
        finished_at=timezone.now(),
    )
