"""Span data -> the OpenTelemetry SDK's ReadableSpan -> OTLP, through the SDK's own encoder.

Protobuf is what every collector takes (Phoenix's /v1/traces takes only that); OTLP/JSON is
the same message through protobuf's JSON mapping, with trace and span ids as hex as the OTLP
spec says (the mapping alone would write base64, which a reader of OTLP/JSON takes for hex
and stores as wrong ids).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

from traces.otel import ids
from traces.otel.spans import SpanData

SCOPE = InstrumentationScope("agentlab.traces", "2")
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def resource(project: str) -> Resource:
    """`openinference.project.name` picks the project in Phoenix (and Arize)."""
    return Resource.create({"service.name": "agentlab", "openinference.project.name": project,
                            "agentlab.installation": ids.installation_id()})


def readable(span: SpanData, res: Resource) -> ReadableSpan:
    flags = TraceFlags(TraceFlags.SAMPLED)  # unsampled spans are dropped by every processor
    context = SpanContext(span.trace_id, span.span_id, is_remote=False, trace_flags=flags)
    parent = (SpanContext(span.trace_id, span.parent_id, is_remote=False, trace_flags=flags)
              if span.parent_id is not None else None)
    status = (Status(StatusCode.ERROR, span.error) if span.error is not None
              else Status(StatusCode.OK))
    events = [Event(name, attributes, timestamp=when) for name, when, attributes in span.events]
    return ReadableSpan(name=span.name, context=context, parent=parent, resource=res,
                        attributes=span.attributes, events=events, status=status,
                        start_time=span.start_ns, end_time=max(span.end_ns, span.start_ns),
                        instrumentation_scope=SCOPE)


def request(spans: Iterable[SpanData], project: str) -> ExportTraceServiceRequest:
    res = resource(project)
    return encode_spans([readable(s, res) for s in spans])


def to_protobuf(spans: Iterable[SpanData], project: str) -> bytes:
    return request(spans, project).SerializeToString()


def to_json(spans: Iterable[SpanData], project: str) -> dict[str, Any]:
    """OTLP/JSON: lowerCamelCase fields, int64 as strings, hex ids."""
    doc = json_format.MessageToDict(request(spans, project),
                                  use_integers_for_enums=True)
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for key in _ID_FIELDS:
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return doc
