"""Steps -> rows, then -> the channel layer: persist first, publish second (DESIGN.md)."""

from __future__ import annotations

import logging
import os
import socket
import time
from datetime import UTC, datetime
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from traces.models import ACTIVE_STATUSES, Run, Step
from traces.schema import Step as StepRecord

log = logging.getLogger(__name__)

FINISHED_STATUSES = ("succeeded", "failed", "cancelled", "timed_out", "interrupted")


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def group_name(run_id: int) -> str:
    return f"run-{run_id}"


def _step_fields(step: StepRecord) -> dict[str, Any]:
    return {
        "parent": step.parent,
        "kind": step.kind,
        "role": step.role,
        "name": step.name,
        "status": step.status,
        "input": step.input,
        "output": step.output,
        "text": step.text,
        "started_at": datetime.fromtimestamp(step.started_at, tz=UTC),
        "duration_ms": step.duration_ms,
        "tokens_in": step.tokens_in,
        "tokens_out": step.tokens_out,
        "cost_usd": step.cost_usd,
        "meta": step.meta,
    }


class Recorder:
    """The StepSink of one run: each step is upserted by seq, the run's totals follow."""

    def __init__(self, run_id: int, *, publish: bool = True) -> None:
        self.run_id = run_id
        self.publish = publish
        self.layer = get_channel_layer() if publish else None
        self._versions: dict[int, int] = {}

    async def step(self, step: StepRecord) -> None:
        recorded_at = time.time()
        await sync_to_async(self._save_step, thread_sensitive=False)(step)
        # version: which emission of this seq (consumers render each version once per process);
        # recorded_at / sent_at (epoch s: handed over / row written) measure publish latency.
        version = self._versions[step.seq] = self._versions.get(step.seq, 0) + 1
        await self._send({"type": "run.step", "seq": step.seq, "step": step.to_dict(),
                          "version": version, "recorded_at": recorded_at,
                          "sent_at": time.time()})

    async def token(self, seq: int, delta: str) -> None:
        await self._send({"type": "run.token", "seq": seq, "delta": delta})

    async def status(self, status: str, detail: dict[str, Any]) -> None:
        await sync_to_async(self._save_status, thread_sensitive=False)(status, detail)
        await self._send({"type": "run.status", "status": status, "detail": detail})

    def _save_step(self, step: StepRecord) -> None:
        with transaction.atomic():
            row, created = Step.objects.update_or_create(
                run_id=self.run_id, seq=step.seq, defaults=_step_fields(step)
            )
            if created:
                Run.objects.filter(pk=self.run_id).update(step_count=F("step_count") + 1)

    def _save_status(self, status: str, detail: dict[str, Any]) -> None:
        fields: dict[str, Any] = {"status": status}
        now = timezone.now()
        if status == "running":
            fields |= {"worker": worker_id()}
            Run.objects.filter(pk=self.run_id, started_at__isnull=True).update(started_at=now)
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
        Run.objects.filter(pk=self.run_id).update(**fields)

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

    async def step(self, step: Step) -> None:
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
    dead = []
    for run in Run.objects.active().filter(worker__startswith=f"{host}:").only("pk", "worker"):
        pid = int(run.worker.rsplit(":", 1)[1] or 0)
        if pid != os.getpid() and not _pid_alive(pid):
            dead.append(run.pk)
    # Queued runs with no worker at all were never picked up by anyone.
    dead += list(Run.objects.filter(status="queued", worker="").values_list("pk", flat=True))
    return Run.objects.filter(pk__in=dead, status__in=ACTIVE_STATUSES).update(
        status="interrupted",
        error="The process running this run stopped before it finished; resume it as a fork.",
        finished_at=timezone.now(),
    )


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
