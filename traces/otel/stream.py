"""A run's spans as it goes: the StepSink that hands them to live export (traces.otel.live).

A step's span is built once nothing later can fall inside it: when it has finished and a
step that is not its descendant has begun (or the run has ended), so a sub-run's window
encloses its children as in the download, and both give the same ids, names and
attributes. The root span follows the run's last status. Only light facts (parent, start,
window) are kept per step; a step's full record only until its span is built. Nothing here
raises into the run: a span that cannot be built is logged and counted.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.conf import settings

from traces.otel import attributes as oi
from traces.otel import encode, live
from traces.otel.spans import RunInfo, root_span, run_info, step_span
from traces.redact import redact_urls
from traces.schema import FINISHED_STATUSES, Step

log = logging.getLogger(__name__)


class LiveTree:
    """What spans.step_span asks of a tree, kept up to date step by step."""

    def __init__(self) -> None:
        self.parents: dict[int, int | None] = {}
        self.starts: dict[int, int] = {}
        self.ends: dict[int, int] = {}  # own end, once known
        self.windows: dict[int, list[int]] = {}
        self.children: dict[int, list[int]] = {}
        self.waiting: list[int] = []  # no duration: ends when the next step starts
        self.end_ns: int | None = None

    def parent_of(self, step: Any) -> int | None:
        p = step.parent
        return p if p in self.parents and p < step.seq else None

    def add(self, step: Step) -> bool:
        """Record a step's version; True when its seq is new."""
        new = step.seq not in self.parents
        start = int(step.started_at * 1e9)
        if new:
            for seq in self.waiting:  # the steps before it without a duration end here
                self._end(seq, max(self.starts[seq], start))
            self.waiting = []
            self.parents[step.seq] = self.parent_of(step)
            self.starts[step.seq] = start
            self.windows[step.seq] = [start, start]
            if (p := self.parents[step.seq]) is not None:
                self.children.setdefault(p, []).append(step.seq)
        if step.status != "running":
            if step.duration_ms is not None:
                self._end(step.seq, start + int(step.duration_ms * 1e6))
            else:
                self.waiting.append(step.seq)
        return new

    def _end(self, seq: int, end: int) -> None:
        self.ends[seq] = end
        node: int | None = seq
        while node is not None:  # widen it and every ancestor
            window = self.windows[node]
            window[0], window[1] = min(window[0], self.starts[seq]), max(window[1], end)
            node = self.parents[node]

    def close(self, end_ns: int) -> None:
        self.end_ns = end_ns
        for seq in self.waiting:
            self._end(seq, max(self.starts[seq], end_ns))
        self.waiting = []

    def ancestors(self, seq: int) -> set[int]:
        out, node = set(), self.parents.get(seq)
        while node is not None:
            out.add(node)
            node = self.parents[node]
        return out

    def window(self, seq: int) -> tuple[int, int]:
        start, end = self.windows[seq]
        return start, max(end, self.ends.get(seq, start))

    def own_end(self, step: Any) -> int:
        return self.ends.get(step.seq, self.starts[step.seq])

    @property
    def steps(self) -> list[Any]:  # for root_span: objects with a seq
        return [_Seq(seq) for seq in self.parents]


class _Seq:
    def __init__(self, seq: int) -> None:
        self.seq = seq


class LiveSink:
    """Tee'd after the recorder (agentlab.runs.execution.execute_run) while live export is on."""

    def __init__(self, info: RunInfo, *, started_known: bool = False) -> None:
        self.info, self.started_known = info, started_known
        self.tree = LiveTree()
        self.context = oi.Context(profiles=info.profiles)
        self.pending: dict[int, Step] = {}  # finished, span not built yet
        self.open: set[int] = set()  # seqs a later step may still fall inside
        self.closed: set[int] = set()  # nothing more falls inside; sent once finished
        self.learned: set[int] = set()
        self.resource = encode.resource(settings.AGENTLAB_OTEL_PROJECT)

    @classmethod
    def for_run(cls, run: Any) -> LiveSink | None:
        if not live.enabled():
            return None
        return cls(run_info(run), started_known=run.started_at is not None)

    async def step(self, step: Step) -> None:
        try:
            self._step(step)
        except Exception:
            log.exception("run %s: live export of step %s failed", self.info.pk, step.seq)
            live.STATS.add(build_errors=1)

    def _step(self, step: Step) -> None:
        if self.tree.add(step):  # a new step: every open one it is not inside is closed
            keep = self.tree.ancestors(step.seq)
            self.closed |= self.open - keep
            self.open = (self.open & keep) | {step.seq}
        if step.status != "running":
            record = Step(**step.to_dict())  # a copy: the runtime changes its step later
            self.pending[step.seq] = record
            if step.seq not in self.learned:  # a call's id is matched once
                self.learned.add(step.seq)
                self.context.learn([record])
        for seq in sorted(self.closed & self.pending.keys()):
            self.closed.discard(seq)
            self._send(self.pending.pop(seq))

    async def token(self, seq: int, delta: str) -> None:
        return None

    async def status(self, status: str, detail: dict[str, Any]) -> None:
        if status == "running" and not self.started_known:  # as the recorder's started_at
            self.info.started_ns, self.started_known = time.time_ns(), True
        if status not in FINISHED_STATUSES:
            return
        try:
            now = time.time_ns()
            self.info.finish(status, detail, now)
            self.tree.close(now)
            for seq in sorted(self.pending):
                self._send(self.pending.pop(seq))
            self._submit(root_span(self.info, self.tree))  # type: ignore[arg-type]
        except Exception:
            log.exception("run %s: live export of its root span failed", self.info.pk)
            live.STATS.add(build_errors=1)

    def _send(self, step: Step) -> None:
        self._submit(step_span(self.info, self.tree, step, self.context))  # type: ignore[arg-type]

    def _submit(self, span: Any) -> None:
        span.attributes = redact_urls(span.attributes)
        span.events = redact_urls(span.events)
        span.error = redact_urls(span.error)
        live.submit(encode.readable(span, self.resource))
