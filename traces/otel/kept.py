"""What a step keeps of its span besides the fields read into it (pure): every attribute
nothing reads under its own name, events other than `exception` and the GenAI message events
(`otel.events`), links (`otel.links`), and the scope and resource where they differ from the
run's (`otel.scope`, `otel.resource`); an `exception` event as `exception.type` and the
traceback."""

from __future__ import annotations

import json
from typing import Any

from traces.otel import genai
from traces.otel import openinference as oi
from traces.otel.decode import Span
from traces.otel.values import parsed, text
from traces.schema import Step

_OURS = {"metadata", "agentlab.step.seq", "agentlab.step.kind", "agentlab.step.role",
         "agentlab.step.name", "agentlab.step.status"}
_READ = oi.READ | genai.READ
_READ_PREFIXES = oi.READ_PREFIXES + genai.READ_PREFIXES


def meta(span: Span, oi_kind: str, ours: bool) -> dict[str, Any]:
    a = span.attributes
    meta: dict[str, Any] = {}
    if ours:  # the step's own meta came as JSON
        own = parsed(a.get("metadata"), "application/json")
        meta |= own if isinstance(own, dict) else {}
    meta |= {"otel.span": span.name, "otel.span_id": span.span_id}
    if oi_kind:
        meta["otel.kind"] = oi_kind
    for key, value in a.items():
        if _read(key, ours):
            continue
        meta[key] = value if isinstance(value, str | int | float | bool) else json.dumps(value)
    if not ours and "metadata" in a:
        meta["metadata"] = text(a["metadata"])
    events = []
    for name, when, attrs in span.events:
        if name == "exception":
            meta["exception.type"] = str(attrs.get("exception.type") or "")
            if attrs.get("exception.stacktrace"):
                meta["traceback"] = str(attrs["exception.stacktrace"])
        elif name not in genai.EVENTS:
            events.append({"name": name, "time_ns": when, **attrs} if attrs else
                          {"name": name, "time_ns": when})
    if events:
        meta["otel.events"] = json.dumps(events, ensure_ascii=False, default=str)
    if span.links:
        meta["otel.links"] = json.dumps([{"trace_id": t, "span_id": s, **attrs}
                                         for t, s, attrs in span.links],
                                        ensure_ascii=False, default=str)
    return meta


def _read(key: str, ours: bool) -> bool:
    """Is the attribute read into the step's fields (so not repeated in meta)?"""
    if key in _READ or key.startswith(_READ_PREFIXES):
        return True
    if ours:  # ours: everything under agentlab. and gen_ai. repeats the step's fields
        return key in _OURS or key.startswith(("agentlab.", "gen_ai."))
    return key.startswith("agentlab.")


def where(step: Step, span: Span, main: Span) -> None:
    """The span's scope and resource, where they differ from the run's (kept once there)."""
    if span.scope != main.scope or span.scope_version != main.scope_version:
        step.meta["otel.scope"] = " ".join(filter(None, (span.scope, span.scope_version)))
    if span.resource != main.resource:
        step.meta["otel.resource"] = json.dumps(span.resource, ensure_ascii=False)


def exception(span: Span) -> str:
    return next((str(attrs.get("exception.message") or "") for name, _w, attrs in span.events
                 if name == "exception"), "")


