"""A run as span data in OpenInference terms (pure: no SDK, no ORM writes).

One trace per run: a root AGENT span, then one span per step under its parent step's span.
A step with children (a plan step, a member's turn, a LATS node, a Reflexion attempt) is a
sub-run: an AGENT span whose window encloses its children's. A step recorded without a
duration (a thought, a final answer, an error) lasts until the next step starts. The same
builder serves the download (all steps at once) and the live export (traces.otel.live: a
step's span is built once no later step can be inside it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from traces.otel import attributes as oi
from traces.otel import ids
from traces.schema import RUN_TOTALS, UNANSWERED_STATUSES, Step


@dataclass
class SpanData:
    trace_id: int
    span_id: int
    parent_id: int | None
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    error: str | None = None  # None: status OK
    events: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)


@dataclass
class RunInfo:
    """What the spans say about the run itself (read from a Run row by `run_info`)."""

    pk: int
    agent_name: str = ""
    paradigm: str = ""
    status: str = "running"
    input: str = ""
    final_answer: str = ""
    error: str = ""
    totals: dict[str, Any] = field(default_factory=dict)
    started_ns: int = 0
    finished_ns: int | None = None
    user_id: str = ""
    session_id: str = ""
    profiles: dict[str, Any] = field(default_factory=dict)
    key: bytes | None = None  # the installation's id key (None: this installation's)

    def finish(self, status: str, detail: Mapping[str, Any], when_ns: int) -> None:
        """Update from the runtime's last status (live export)."""
        self.status, self.finished_ns = status, when_ns
        self.final_answer = detail.get("answer") or self.final_answer
        self.error = detail.get("error") or self.error
        self.totals |= dict(detail.get("totals") or {})


def run_info(run: Any, key: bytes | None = None) -> RunInfo:
    """A RunInfo from a Run row (or anything with its attributes)."""
    snapshot = getattr(run, "agent_snapshot", None) or {}
    user = getattr(run, "user", None)
    return RunInfo(
        pk=run.pk, agent_name=run.agent_name or "", paradigm=run.paradigm or "",
        status=run.status, input=run.input or "", final_answer=run.final_answer or "",
        error=run.error or "", totals={k: getattr(run, k, 0) or 0 for k in RUN_TOTALS},
        started_ns=_when(run.started_at) or _when(getattr(run, "created", None)) or 0,
        finished_ns=_when(run.finished_at), user_id=getattr(user, "username", "") or "",
        session_id=_session(run), profiles=dict(snapshot.get("profiles") or {}), key=key)


def _session(run: Any) -> str:
    """A chat's turns share one session.id (Phoenix's Sessions view)."""
    try:
        conversation = run.chat_turn.conversation_id
    except Exception:  # no turn (ObjectDoesNotExist), or not a row at all
        return ""
    return f"agentlab-{ids.installation_id()}-chat-{conversation}"


class Tree:
    """Parents and time windows of steps (anything with seq, parent, started_at,
    duration_ms): a step's window encloses its own time and its descendants'."""

    def __init__(self, steps: Iterable[Any], end_ns: int | None) -> None:
        self.steps = sorted(steps, key=lambda s: s.seq)
        self.by_seq = {s.seq: s for s in self.steps}
        self.end_ns = end_ns
        self.children: dict[int, list[int]] = {}
        for s in self.steps:
            if (p := self.parent_of(s)) is not None:
                self.children.setdefault(p, []).append(s.seq)
        self._next = {a.seq: b for a, b in zip(self.steps, self.steps[1:], strict=False)}
        self._windows: dict[int, tuple[int, int]] = {}

    def parent_of(self, step: Any) -> int | None:
        """The parent's seq when it is a step of this run (else the root), never a cycle."""
        p = step.parent
        return p if p in self.by_seq and p < step.seq else None

    def own_end(self, step: Any) -> int:
        start = _nanos(step.started_at)
        if step.duration_ms is not None:
            return start + int(step.duration_ms * 1_000_000)
        after = self._next.get(step.seq)
        if after is not None:
            return max(start, _nanos(after.started_at))
        return max(start, self.end_ns or start)

    def window(self, seq: int) -> tuple[int, int]:
        if not self._windows and self.steps:
            # Children come after their parent (parent_of), so one pass from the last step
            # back has every child's window ready: no recursion, however deep the tree.
            for step in reversed(self.steps):
                start, end = _nanos(step.started_at), self.own_end(step)
                for child in self.children.get(step.seq, ()):
                    c_start, c_end = self._windows[child]
                    start, end = min(start, c_start), max(end, c_end)
                self._windows[step.seq] = (start, end)
        return self._windows[seq]

    def descends(self, seq: int, ancestor: int) -> bool:
        step = self.by_seq.get(seq)
        while step is not None and (p := self.parent_of(step)) is not None:
            if p == ancestor:
                return True
            step = self.by_seq[p]
        return False


def run_spans(info: RunInfo, steps: Iterable[Any]) -> list[SpanData]:
    """Every span of the run: the root first, then the steps by seq."""
    records = [s.to_record() if hasattr(s, "to_record") else s for s in steps]
    tree = Tree(records, info.finished_ns)
    context = oi.Context.of(records, info.profiles)
    spans = [step_span(info, tree, s, context) for s in tree.steps]
    return [root_span(info, tree), *spans]


def root_span(info: RunInfo, tree: Tree) -> SpanData:
    windows = [tree.window(s.seq) for s in tree.steps]
    start = info.started_ns or min((w[0] for w in windows), default=0)
    if windows:
        start = min(start, *(w[0] for w in windows))
    end = max(info.finished_ns or 0, *(w[1] for w in windows), start)
    failed = info.status in UNANSWERED_STATUSES
    error = (info.error or info.status) if failed else None
    span = SpanData(ids.trace_id(info.pk, info.key), ids.span_id(info.pk, 0, info.key), None,
                    info.agent_name or f"run {info.pk}", start, end, oi.root(info), error)
    if error:
        span.events.append(oi.exception_event(info.status, error, end))
    return span


def step_span(info: RunInfo, tree: Tree, step: Step, context: oi.Context) -> SpanData:
    parent = tree.parent_of(step)
    start, end = tree.window(step.seq)
    has_children = bool(tree.children.get(step.seq))
    attrs, name = oi.step(step, context, sub_run=has_children)
    error = (step.text or step.kind)[:1000] if step.status == "error" else None
    span = SpanData(ids.trace_id(info.pk, info.key), ids.span_id(info.pk, step.seq, info.key),
                    ids.span_id(info.pk, parent if parent is not None else 0, info.key),
                    name, start, end, attrs, error)
    if error is not None:
        span.events.append(oi.step_exception(step, tree.own_end(step)))
    return span


def _nanos(epoch_s: float) -> int:
    return int(epoch_s * 1_000_000_000)


def _when(value: datetime | None) -> int | None:
    return _nanos(value.timestamp()) if value else None
