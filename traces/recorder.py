"""Steps -> rows, then -> the channel layer: persist first, publish second (DESIGN.md).

How, and why (measured by `manage.py bench_live`): the process's one writer thread writes every
run's rows, all that wait at once in one transaction (traces/writer.py). A run waits for its
step's row — so what it recorded survives the process — but not for the publishing, which
follows in the run's order (tokens after the step they belong to). A status waits until
everything before it is published, so a final status never overtakes a step.

Letting a run go on before its row was written (write-behind, one or more steps ahead) was
measured too: more steps per second at one run, but worse latency at twenty, and a crash
could lose what a run had already recorded.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from typing import Any

from channels.layers import get_channel_layer
from django.utils import timezone

from traces.models import ACTIVE_STATUSES, Run
from traces.schema import Step as StepRecord
from traces.workers import left_by_dead_process, worker_id
from traces.writer import WRITER

log = logging.getLogger(__name__)

FINISHED_STATUSES = ("succeeded", "failed", "cancelled", "timed_out", "interrupted")


def group_name(run_id: int) -> str:
    return f"run-{run_id}"


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


class _Lane:
    """One run's publishing, in order (shared by every recorder of the run)."""

    def __init__(self) -> None:
        self.tail: asyncio.Task[None] | None = None


_LANES: dict[int, _Lane] = {}  # run id -> its lane, while anything is being published


class Recorder:
    """The StepSink of one run: each step is upserted by seq, then published; the run's totals
    follow with its statuses."""

    def __init__(self, run_id: int, *, publish: bool = True) -> None:
        self.run_id = run_id
        self.layer = get_channel_layer() if publish else None
        self._versions: dict[int, int] = {}
        self._saved: set[int] = set()  # seqs with a row (touched by the writer thread only)

    async def step(self, step: StepRecord) -> None:
        recorded_at = time.time()
        record = step.to_dict()  # a deep copy: the run may change its dicts after this
        # version: which emission of this seq (consumers render each version once per process);
        # recorded_at / sent_at (epoch s: handed over / row written) measure publish latency.
        version = self._versions[step.seq] = self._versions.get(step.seq, 0) + 1
        written = WRITER.step(self, StepRecord(**record))  # the row, from the same copy
        self._then(written, {"type": "run.step", "seq": step.seq, "step": record,
                             "version": version, "recorded_at": recorded_at})
        await written  # a row that cannot be written fails the run's step, as it should

    async def token(self, seq: int, delta: str) -> None:
        message = {"type": "run.token", "seq": seq, "delta": delta}
        lane = _LANES.get(self.run_id)
        if lane is None or lane.tail is None:
            await self._send(message)
        else:  # after the step it belongs to
            self._then(None, message)

    async def status(self, status: str, detail: dict[str, Any]) -> None:
        await self.flush()
        await WRITER.call(_save_status, self.run_id, status, detail)
        await self._send({"type": "run.status", "status": status, "detail": detail})

    async def flush(self) -> None:
        """Wait until everything handed over so far is published."""
        while (lane := _LANES.get(self.run_id)) is not None and lane.tail is not None:
            await asyncio.shield(lane.tail)

    def saved(self) -> set[int]:  # for the writer (traces.writer.Owner)
        return self._saved

    def _then(self, written: asyncio.Future[None] | None, message: dict[str, Any]) -> None:
        lane = _LANES.setdefault(self.run_id, _Lane())
        before = lane.tail

        async def publish() -> None:
            try:
                if before is not None:
                    await before
                if written is not None:
                    try:
                        await written
                    except Exception:  # the run was told; what is not in the trace is not shown
                        return
                    message["sent_at"] = time.time()
                await self._send(message)
            finally:
                if lane.tail is task:  # the last in flight: the lane is idle
                    lane.tail = None
                    _LANES.pop(self.run_id, None)

        task = lane.tail = asyncio.get_running_loop().create_task(publish())

    async def _send(self, message: dict[str, Any]) -> None:
        if self.layer is None:
            return
        try:
            await self.layer.group_send(group_name(self.run_id), message)
        except Exception:  # a full or absent channel layer must never lose a recorded step
            log.exception("could not publish %s for run %s", message["type"], self.run_id)


class TeeSink:
    """Send every event to several sinks, in order (the recorder first: persist, then show)."""

    def __init__(self, *sinks: Any) -> None:
        self.sinks = sinks

    async def step(self, step: StepRecord) -> None:
        for sink in self.sinks:
            await sink.step(step)

    async def token(self, seq: int, delta: str) -> None:
        for sink in self.sinks:
            await sink.token(seq, delta)

    async def status(self, status: str, detail: dict[str, Any]) -> None:
        for sink in self.sinks:
            await sink.status(status, detail)


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
