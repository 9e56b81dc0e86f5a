"""One OTLP trace in OpenInference terms -> a run's fields and steps (pure).

Span kinds become step kinds (LLM -> llm, TOOL/RETRIEVER/RERANKER/EMBEDDING -> tool,
EVALUATOR -> evaluation, GUARDRAIL -> guardrail, a nested AGENT -> message, CHAIN and the rest
-> thought);
a span Agent Lab exported keeps its own kind, role and name (agentlab.step.*). A root AGENT or
CHAIN span is the run itself (its input, output, name, status); any other root is a step
too. Steps are numbered depth-first by start time. Attributes nothing here reads are kept on
the step's meta under their own keys, so the run page shows them.
"""

from __future__ import annotations

import json
from typing import Any

from traces.otel.decode import Span
from traces.schema import FINISHED_STATUSES, STEP_KINDS, Step

_KINDS = {"LLM": "llm", "TOOL": "tool", "RETRIEVER": "tool", "RERANKER": "tool",
          "EMBEDDING": "tool", "EVALUATOR": "evaluation", "GUARDRAIL": "guardrail",
          "AGENT": "message"}
_CONTAINERS = ("AGENT", "CHAIN")
# Read into the step's fields: not repeated in meta.
_READ = {"openinference.span.kind", "input.value", "input.mime_type", "output.value",
         "output.mime_type", "llm.model_name", "llm.token_count.prompt",
         "llm.token_count.completion", "llm.token_count.total", "llm.cost.total",
         "llm.invocation_parameters", "llm.finish_reason", "tool.name", "metadata",
         "agentlab.step.seq", "agentlab.step.kind", "agentlab.step.role",
         "agentlab.step.name", "agentlab.step.status"}
_READ_PREFIXES = ("llm.input_messages.", "llm.output_messages.", "llm.tools.")
MAX_TEXT = 1_000_000


def run_from_trace(spans: list[Span]) -> tuple[dict[str, Any], list[Step]]:
    """(Run fields, steps) of one trace's spans."""
    by_id = {s.span_id: s for s in spans}
    children: dict[str, list[Span]] = {}
    roots = []
    for s in spans:
        if s.parent_id and s.parent_id in by_id and s.parent_id != s.span_id:
            children.setdefault(s.parent_id, []).append(s)
        else:
            roots.append(s)
    roots.sort(key=lambda s: s.start_ns)
    container = roots[0] if len(roots) == 1 and _is_container(roots[0]) else None
    top = sorted(children.get(container.span_id, []), key=lambda s: s.start_ns) \
        if container else roots
    steps: list[Step] = []
    stack = [(s, None) for s in reversed(top)]
    seen: set[str] = set()
    while stack:  # depth first, children by start time; a cycle is cut where it closes
        span, parent = stack.pop()
        if span.span_id in seen:
            continue
        seen.add(span.span_id)
        steps.append(step_from_span(span, len(steps) + 1, parent))
        kids = sorted(children.get(span.span_id, []), key=lambda s: s.start_ns)
        stack.extend((k, steps[-1].seq) for k in reversed(kids))
    return _run_fields(container, roots, spans, steps), steps


def _is_container(span: Span) -> bool:
    return ("agentlab.run.id" in span.attributes
            or span.attributes.get("openinference.span.kind") in _CONTAINERS)


def _run_fields(container: Span | None, roots: list[Span], spans: list[Span],
                steps: list[Step]) -> dict[str, Any]:
    first, last = (container, container) if container else (roots[0], roots[-1])
    a = container.attributes if container else {}
    status = a.get("agentlab.run.status")
    if status not in FINISHED_STATUSES:
        status = "failed" if any(r.error for r in roots) else "succeeded"
    error = next((r.status_message or _exception(r) or "failed" for r in roots if r.error), "")
    start = min(s.start_ns for s in spans)
    end = max(s.end_ns for s in spans)
    resource = first.resource
    llm = [s for s in steps if s.kind == "llm"]
    return {
        "agent": None, "agent_name": _cut(first.name, 200),
        "paradigm": _cut(str(a.get("agentlab.run.paradigm") or ""), 50),
        "input": _cut(_text(first.attributes.get("input.value")), MAX_TEXT),
        "final_answer": _cut(_text(last.attributes.get("output.value")), MAX_TEXT),
        "status": status, "error": _cut(error, MAX_TEXT),
        "agent_snapshot": {"imported_from": {
            "format": "otlp", "trace_id": first.trace_id,
            "service": str(resource.get("service.name") or ""),
            "project": str(resource.get("openinference.project.name") or ""),
            "scope": first.scope, "spans": len(spans)}},
        "llm_calls": len(llm), "tool_calls": sum(s.kind == "tool" for s in steps),
        "tokens_in": sum(s.tokens_in for s in llm), "tokens_out": sum(s.tokens_out for s in llm),
        "cost_usd": sum(s.cost_usd for s in llm), "wall_ms": (end - start) / 1e6,
        "started_at_ns": start, "finished_at_ns": end,
    }


def step_from_span(span: Span, seq: int, parent: int | None) -> Step:
    """One span as a step numbered `seq` under step `parent` (the live receiver's too)."""
    a = span.attributes
    oi_kind = str(a.get("openinference.span.kind") or "").upper()
    kind = a.get("agentlab.step.kind")
    if kind not in STEP_KINDS:
        kind = _KINDS.get(oi_kind, "thought")
    output_text = _text(a.get("output.value"))
    if "agentlab.step.kind" in a:  # ours: an empty role or name was left out
        role, name = a.get("agentlab.step.role", "agent"), a.get("agentlab.step.name", "")
    else:
        role = span.name if kind == "message" else "agent"
        name = a.get("tool.name") or span.name
    step = Step(seq=seq, parent=parent, kind=kind, role=_cut(str(role), 100),
                name=_cut(str(name), 200),
                status="error" if span.error else "ok",
                started_at=span.start_ns / 1e9,
                duration_ms=max(span.end_ns - span.start_ns, 0) / 1e6,
                input=_value(a.get("input.value"), a.get("input.mime_type")),
                text=_cut(output_text, MAX_TEXT))
    if kind == "llm":
        _llm(step, a)
    elif output_text and _json_like(a.get("output.mime_type"), output_text):
        step.output = _value(output_text, "application/json")
    if "agentlab.step.output" in a:  # ours: the step's recorded output
        step.output = _value(a["agentlab.step.output"], "application/json")
    if span.error and not step.text:
        step.text = _cut(span.status_message or _exception(span) or "error", MAX_TEXT)
    step.meta = _meta(span, oi_kind)
    return step


def _llm(step: Step, a: dict[str, Any]) -> None:
    messages = _indexed(a, "llm.input_messages.")
    request = step.input if isinstance(step.input, dict) and "messages" in step.input else None
    if request is None:
        request = {"messages": [_message(m) for m in messages]}
        tools = _indexed(a, "llm.tools.")
        if tools:
            request["tools"] = [_value(t.get("tool.json_schema"), "application/json")
                                for t in tools]
        params = _value(a.get("llm.invocation_parameters"), "application/json")
        if isinstance(params, dict):
            request |= {k: v for k, v in params.items() if k not in request}
    step.input = request
    out = _indexed(a, "llm.output_messages.")
    reply = _message(out[0]) if out else {}
    text = reply.get("content") if isinstance(reply.get("content"), str) else step.text
    step.text = _cut(text or "", MAX_TEXT)
    step.tokens_in = _int(a.get("llm.token_count.prompt"))
    step.tokens_out = _int(a.get("llm.token_count.completion"))
    step.cost_usd = max(_float(a.get("llm.cost.total")), 0.0)
    if step.status != "error":
        step.output = {"text": step.text, "model": str(a.get("llm.model_name") or ""),
                       "finish_reason": a.get("llm.finish_reason"),
                       "tool_calls": [_call(c) for c in reply.get("tool_calls") or []]}
    if a.get("llm.model_name") and "agentlab.step.kind" not in a:
        step.name = _cut(str(a["llm.model_name"]), 200)


def _indexed(a: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """`llm.input_messages.0.message.role` & co. -> [{"message.role": …}, …] by index."""
    items: dict[int, dict[str, Any]] = {}
    for key, value in a.items():
        if key.startswith(prefix):
            index, _, rest = key[len(prefix):].partition(".")
            if index.isdigit():
                items.setdefault(int(index), {})[rest] = value
    return [items[i] for i in sorted(items)]


def _message(flat: dict[str, Any]) -> dict[str, Any]:
    m: dict[str, Any] = {"role": flat.get("message.role", ""),
                         "content": flat.get("message.content")}
    if m["content"] is None:  # multi-part content: message.contents.N.message_content.text
        parts = _indexed(flat, "message.contents.")
        m["content"] = "".join(str(p.get("message_content.text") or "") for p in parts)
    for key in ("name", "tool_call_id"):
        if flat.get(f"message.{key}"):
            m[key] = flat[f"message.{key}"]
    calls = _indexed(flat, "message.tool_calls.")
    if calls:
        m["tool_calls"] = [{"id": c.get("tool_call.id", ""), "type": "function", "function": {
            "name": c.get("tool_call.function.name", ""),
            "arguments": c.get("tool_call.function.arguments", "")}} for c in calls]
    return m


def _call(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    raw = str(function.get("arguments") or "")
    args = _value(raw, "application/json")
    return {"id": str(call.get("id") or ""), "name": str(function.get("name") or ""),
            "arguments": args if isinstance(args, dict) else None, "raw_arguments": raw,
            "error": None}


def _meta(span: Span, oi_kind: str) -> dict[str, Any]:
    a = span.attributes
    meta: dict[str, Any] = {}
    if "agentlab.step.kind" in a:  # ours: the step's own meta came as JSON
        own = _value(a.get("metadata"), "application/json")
        meta |= own if isinstance(own, dict) else {}
    meta |= {"otel.span": span.name, "otel.span_id": span.span_id}
    if oi_kind:
        meta["otel.kind"] = oi_kind
    for key, value in a.items():
        if key in _READ or key.startswith(_READ_PREFIXES) or key.startswith("agentlab."):
            continue
        meta[key] = value if isinstance(value, str | int | float | bool) else json.dumps(value)
    if "agentlab.step.kind" not in a and "metadata" in a:
        meta["metadata"] = _text(a["metadata"])
    for name, _when, attrs in span.events:
        if name == "exception":
            meta["exception.type"] = str(attrs.get("exception.type") or "")
            if attrs.get("exception.stacktrace"):
                meta["traceback"] = str(attrs["exception.stacktrace"])
    return meta


def _exception(span: Span) -> str:
    return next((str(attrs.get("exception.message") or "") for name, _w, attrs in span.events
                 if name == "exception"), "")


def _json_like(mime: Any, text: str) -> bool:
    return mime == "application/json" or text[:1] in "{["


def _value(value: Any, mime: Any) -> Any:
    if not isinstance(value, str):
        return value
    if mime == "application/json" or value[:1] in "{[":
        try:
            return json.loads(value)
        except ValueError:
            return _cut(value, MAX_TEXT)
    return _cut(value, MAX_TEXT)


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit]


def _int(value: Any) -> int:
    try:
        return max(int(value or 0), 0)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an infinite double
        return 0


def _float(value: Any) -> float:
    try:
        number = float(value or 0)
    except (TypeError, ValueError):
        return 0.0
    return number if number == number and number not in (float("inf"), float("-inf")) else 0.0
