"""A run as OTLP/JSON spans in OpenInference conventions, for Phoenix, Langfuse and friends.

One trace per run: a root AGENT span, then one span per step (LLM, TOOL, else CHAIN) under its
parent step's span. Ids are derived from the run id and the step seq, so exporting twice gives the
same ids. Credentials in URLs are removed (traces.redact), as in a bundle. Pure: reads the run
by attribute and takes steps as schema Steps (or rows with `to_record()`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from traces.redact import redact_urls
from traces.schema import Step

SCOPE = {"name": "agentlab.traces", "version": "1"}
SPAN_KIND_INTERNAL = 1
STATUS_OK, STATUS_ERROR = 1, 2
_ERROR_RUN_STATUSES = ("failed", "timed_out", "cancelled", "interrupted")
_INVOCATION_KEYS = ("temperature", "max_tokens", "stop", "tool_choice", "response_format")


def trace_id(run_id: Any) -> str:
    return hashlib.sha256(f"agentlab-run:{run_id}".encode()).hexdigest()[:32]


def span_id(run_id: Any, seq: int) -> str:
    """seq 0 is the run's root span."""
    return hashlib.sha256(f"agentlab-run:{run_id}:{seq}".encode()).hexdigest()[:16]


def export_otlp(run: Any, steps: Iterable[Any]) -> dict[str, Any]:
    """The OTLP/JSON document (`resourceSpans` → `scopeSpans` → `spans`) of one run."""
    records = [s.to_record() if hasattr(s, "to_record") else s for s in steps]
    known = {s.seq for s in records}
    tid, root_id = trace_id(run.pk), span_id(run.pk, 0)
    spans = [_root_span(run, records, tid, root_id)]
    for step in records:
        parent = span_id(run.pk, step.parent) if step.parent in known else root_id
        spans.append(_step_span(step, tid, span_id(run.pk, step.seq), parent))
    resource = _attributes({"service.name": "agentlab", "agentlab.run.id": run.pk})
    # No credentials leave: URLs anywhere in it (an LLM error names its endpoint) lose their
    # user-info and key-like query parameters (traces.redact).
    return redact_urls({"resourceSpans": [{"resource": {"attributes": resource},
                                           "scopeSpans": [{"scope": SCOPE, "spans": spans}]}]})


def _root_span(run: Any, steps: list[Step], tid: str, sid: str) -> dict[str, Any]:
    starts = [_nanos(s.started_at) for s in steps]
    ends = [_end(s) for s in steps]
    start = _when(run.started_at) or min(starts, default=None) or _when(run.created) or 0
    end = _when(run.finished_at) or max(ends, default=start)
    attrs = {
        "openinference.span.kind": "AGENT",
        "agent.name": run.agent_name,
        "input.value": run.input,
        "output.value": run.final_answer,
        "llm.token_count.prompt": run.tokens_in,
        "llm.token_count.completion": run.tokens_out,
        "llm.token_count.total": run.tokens_in + run.tokens_out,
        "metadata": _json({"run_id": run.pk, "paradigm": run.paradigm, "status": run.status,
                           "llm_calls": run.llm_calls, "tool_calls": run.tool_calls,
                           "cost_usd": float(run.cost_usd or 0)}),
    }
    failed = run.status in _ERROR_RUN_STATUSES
    return _span(tid, sid, "", run.agent_name or f"run {run.pk}", start, end, attrs,
                 STATUS_ERROR if failed else STATUS_OK, run.error if failed else "")


def _step_span(step: Step, tid: str, sid: str, parent: str) -> dict[str, Any]:
    attrs: dict[str, Any] = {"agentlab.step.seq": step.seq, "agentlab.step.kind": step.kind,
                             "agentlab.step.role": step.role}
    if step.kind == "llm":
        attrs |= _llm_attributes(step)
        name = f"llm {step.name}".strip()
    elif step.kind == "tool":
        attrs |= {"openinference.span.kind": "TOOL", "tool.name": step.name,
                  **_io("input", step.input), **_io("output", step.text or step.output)}
        name = step.name or "tool"
    else:
        attrs |= {"openinference.span.kind": "CHAIN", **_io("input", step.input),
                  **_io("output", step.output if step.output is not None else step.text)}
        name = f"{step.kind} {step.name}".strip()
    if step.meta:
        attrs["metadata"] = _json(step.meta)
    error = step.status == "error"
    return _span(tid, sid, parent, name, _nanos(step.started_at), _end(step), attrs,
                 STATUS_ERROR if error else STATUS_OK, step.text[:1000] if error else "")


def _llm_attributes(step: Step) -> dict[str, Any]:
    request = step.input if isinstance(step.input, dict) else {}
    reply = step.output if isinstance(step.output, dict) else {}
    attrs: dict[str, Any] = {
        "openinference.span.kind": "LLM",
        "llm.model_name": reply.get("model") or step.name,
        "llm.token_count.prompt": step.tokens_in,
        "llm.token_count.completion": step.tokens_out,
        "llm.token_count.total": step.tokens_in + step.tokens_out,
        "llm.cost.total": float(step.cost_usd or 0),
        "llm.invocation_parameters": _json({k: request[k] for k in _INVOCATION_KEYS
                                            if request.get(k) is not None}),
        **_io("input", request or step.input),
        **_io("output", step.text),
    }
    for i, message in enumerate(request.get("messages") or []):
        attrs |= _message(f"llm.input_messages.{i}.message", message)
    for i, tool in enumerate(request.get("tools") or []):
        attrs[f"llm.tools.{i}.tool.json_schema"] = _json(tool)
    if reply:
        out = {"role": "assistant", "content": reply.get("text", step.text),
               "tool_calls": [{"id": c.get("id"), "function": {
                   "name": c.get("name"), "arguments": c.get("raw_arguments", "")}}
                   for c in reply.get("tool_calls") or []]}
        attrs |= _message("llm.output_messages.0.message", out)
    elif step.text:
        attrs |= _message("llm.output_messages.0.message", {"role": "assistant",
                                                            "content": step.text})
    return attrs


def _message(prefix: str, message: Any) -> dict[str, Any]:
    if not isinstance(message, dict):
        return {f"{prefix}.content": _text(message)}
    attrs = {f"{prefix}.role": str(message.get("role", "")),
             f"{prefix}.content": _text(message.get("content"))}
    if message.get("name"):
        attrs[f"{prefix}.name"] = str(message["name"])
    if message.get("tool_call_id"):
        attrs[f"{prefix}.tool_call_id"] = str(message["tool_call_id"])
    for j, call in enumerate(message.get("tool_calls") or []):
        function = (call.get("function") or {}) if isinstance(call, dict) else {}
        base = f"{prefix}.tool_calls.{j}.tool_call"
        if isinstance(call, dict) and call.get("id"):
            attrs[f"{base}.id"] = str(call["id"])
        attrs[f"{base}.function.name"] = str(function.get("name", ""))
        attrs[f"{base}.function.arguments"] = _text(function.get("arguments"))
    return attrs


def _io(which: str, value: Any) -> dict[str, Any]:
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        return {f"{which}.value": value, f"{which}.mime_type": "text/plain"}
    return {f"{which}.value": _json(value), f"{which}.mime_type": "application/json"}


def _span(tid: str, sid: str, parent: str, name: str, start: int, end: int,
          attrs: dict[str, Any], code: int, message: str) -> dict[str, Any]:
    status: dict[str, Any] = {"code": code}
    if message:
        status["message"] = message
    return {"traceId": tid, "spanId": sid, "parentSpanId": parent, "name": name,
            "kind": SPAN_KIND_INTERNAL, "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(max(end, start)), "attributes": _attributes(attrs),
            "status": status}


def _attributes(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    """OTLP/JSON AnyValue: int64 as a decimal string, as the protobuf JSON mapping says."""
    out = []
    for key, value in attrs.items():
        if value is None:
            continue
        if isinstance(value, bool):
            typed: dict[str, Any] = {"boolValue": value}
        elif isinstance(value, int):
            typed = {"intValue": str(value)}
        elif isinstance(value, float):
            typed = {"doubleValue": value}
        else:
            typed = {"stringValue": str(value)}
        out.append({"key": key, "value": typed})
    return out


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else _json(value))


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _nanos(epoch_s: float) -> int:
    return int(epoch_s * 1_000_000_000)


def _end(step: Step) -> int:
    return _nanos(step.started_at) + int((step.duration_ms or 0) * 1_000_000)


def _when(value: datetime | None) -> int | None:
    return _nanos(value.timestamp()) if value else None
