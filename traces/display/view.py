"""What a step looks like on the page: display data from plain values (no queries here).

The views load a page of steps as dicts (big payloads left in the database, only their sizes
read); `step_view` turns each into a `StepView` the templates show as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils.safestring import SafeString

from traces.display import highlight as hl
from traces.display.figures import format_duration
from traces.display.labels import status_word

PAYLOAD_LIMIT = 2048  # characters shown inline; bigger payloads are fetched when opened
TEXT_LABELS = {
    "llm": "Reply", "tool": "Observation", "thought": "Thought", "plan": "Plan",
    "reflection": "Reflection", "evaluation": "Evaluation", "node": "Node", "message": "Message",
    "final": "Answer", "error": "Error", "user": "User", "approval": "Decision",
    "guardrail": "Guardrail",
}
INPUT_LABELS = {"llm": "Request", "tool": "Arguments", "approval": "Arguments"}
OUTPUT_LABELS = {"llm": "Response", "tool": "Raw output"}
# Payloads folded even when small: what they hold is already shown in a friendlier form.
FOLDED = {("llm", "input"), ("llm", "output"), ("tool", "output"), ("approval", "output"),
          ("final", "output"), ("error", "output"),  # a failure: its text shown, raw JSON folded
          ("guardrail", "output")}  # the spans: the text says what was acted on
FOLDED_INLINE = 400  # folded payloads up to this size come with the page; bigger ones on demand
FACT_SKIP = {"traceback"}
# How a step's meta reads on its card: "first token 13.3 s", not "ttft_ms 1.33e+04".
FACT_LABELS = {"ttft_ms": "first token", "latency_ms": "latency", "duration_ms": "duration",
               "recorded_ttft_ms": "first token, as recorded",
               "queued_ms": "waited for the model"}  # its turn on a busy model (llm/gate.py)
# A replayed step's reply came from the record in a millisecond: its timings are the recorded
# call's, said as such (not as if measured in this run).
RECORDED_FACTS = {"ttft_ms": "recorded_ttft_ms"}


@dataclass
class Payload:
    field: str  # input | output | text
    label: str
    size: int
    html: SafeString | None  # None: too big, fetched on demand
    open: bool = False


@dataclass
class ToolCallView:
    name: str
    arguments: SafeString
    error: str | None = None


@dataclass
class StepView:
    seq: int
    parent: int | None
    kind: str
    role: str
    name: str
    status: str
    offset_ms: float | None
    duration_ms: float | None
    tokens_in: int
    tokens_out: int
    cost_usd: float
    depth: int = 0
    text_label: str = ""
    text: str | None = None  # None: too long, fetched on demand
    text_size: int = 0
    text_html: SafeString | None = None  # highlighted when the text is JSON, SQL or a diff
    payloads: list[Payload] = field(default_factory=list)
    tool_calls: list[ToolCallView] = field(default_factory=list)
    code: list[tuple[str, SafeString]] = field(default_factory=list)
    facts: list[tuple[str, str]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    traceback: str = ""
    # What the page's viewer may see and give of feedback on this step (hook "step_feedback";
    # None on live frames, which every watcher shares).
    feedback: SafeString | None = None

    @property
    def is_llm(self) -> bool:
        return self.kind == "llm"


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == {} or value == []


def epoch(value: datetime | float | None) -> float | None:
    """Seconds since the epoch of a datetime or a number (None stays None)."""
    if value is None:
        return None
    return value.timestamp() if isinstance(value, datetime) else float(value)


def step_view(row: dict[str, Any], *, run_start: datetime | float | None = None,
              depth: int = 0) -> StepView:
    """A StepView from a dict of step fields. `input`/`output`/`text` may be missing (too big to
    load): then `<field>_size` says how big and the page fetches it when opened."""
    kind = row["kind"]
    started, start = epoch(row.get("started_at")), epoch(run_start)
    view = StepView(
        seq=row["seq"], parent=row.get("parent"), kind=kind, role=row.get("role") or "",
        name=row.get("name") or "", status=row.get("status") or "ok",
        offset_ms=(started - start) * 1000 if started is not None and start is not None else None,
        duration_ms=row.get("duration_ms"), tokens_in=row.get("tokens_in") or 0,
        tokens_out=row.get("tokens_out") or 0, cost_usd=row.get("cost_usd") or 0.0,
        depth=depth, text_label=TEXT_LABELS.get(kind, kind.title()),
    )
    _set_text(view, row)
    for name in ("input", "output"):
        if payload := _payload(kind, name, row):
            view.payloads.append(payload)
    if kind in ("tool", "approval") and isinstance(row.get("input"), dict):
        view.code = hl.code_blocks(row["input"])
    calls = row.get("tool_calls")
    if calls is None and isinstance(row.get("output"), dict):
        calls = row["output"].get("tool_calls")
    if kind == "llm" and isinstance(calls, list):
        view.tool_calls = [_tool_call(c) for c in calls if isinstance(c, dict)]
    meta = view.meta = row.get("meta") or {}
    replayed = bool(meta.get("replayed"))
    view.facts = [(RECORDED_FACTS.get(str(k), str(k)) if replayed else str(k), _fact(v, str(k)))
                  for k, v in meta.items()
                  if k not in FACT_SKIP and not isinstance(v, dict | list) and v is not None]
    view.traceback = str(meta.get("traceback") or "")
    return view


def _set_text(view: StepView, row: dict[str, Any]) -> None:
    view.text_size = row.get("text_size", len(row.get("text") or ""))
    if "text" not in row:
        return  # too long: fetched on demand
    view.text = row["text"] or ""
    if view.text and (lexer := hl.guess_lexer(view.text)) != "text":
        view.text_html = hl.highlight(view.text, lexer)


def _payload(kind: str, name: str, row: dict[str, Any]) -> Payload | None:
    label = (INPUT_LABELS if name == "input" else OUTPUT_LABELS).get(kind, name.title())
    folded = (kind, name) in FOLDED
    if name not in row:
        return Payload(name, label, row.get(f"{name}_size", 0), None)
    value = row[name]
    if _empty(value) or (name == "output" and value == row.get("text")):
        return None  # nothing to show, or the text already shows it (a final answer)
    size = len(value) if isinstance(value, str) else (
        row.get(f"{name}_size") or hl.json_size(value))
    if folded and size > FOLDED_INLINE:
        return Payload(name, label, size, None)  # shown elsewhere: fetched only when opened
    return Payload(name, label, size, hl.highlight_value(value), open=not folded)


def _tool_call(call: dict[str, Any]) -> ToolCallView:
    args = call.get("arguments")
    html = hl.highlight_value(args) if args is not None else hl.plain(
        str(call.get("raw_arguments") or ""))
    return ToolCallView(name=str(call.get("name") or "?"), arguments=html,
                        error=call.get("error"))


def fact_label(key: str) -> str:
    if key in FACT_LABELS:
        return FACT_LABELS[key]
    return (key[:-3] if key.endswith("_ms") else key).replace("_", " ")


def _fact(value: Any, key: str = "") -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key.endswith("_ms") and isinstance(value, int | float):
        return format_duration(value)
    if key == "status" and isinstance(value, str):
        return status_word(value)
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 1e6 else f"{value:,.0f}"
    text = str(value)
    return text if len(text) <= 120 else text[:117] + "…"
