"""OTLP trace data -> plain spans, grouped by trace (pure).

Takes what collectors and tools write: an ExportTraceServiceRequest in protobuf, OTLP/JSON
(lowerCamelCase or the proto's snake_case names, ids in hex as the OTLP spec says), several
such documents one per line (the collector's file exporter), a JSON list of them, or a page of
Phoenix's span API (`{"data": [span, …]}` from /v1/projects/{project}/spans/otlpv1).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

MAX_SPANS = 100_000  # as many as a bundle may have steps
_HEX = re.compile(r"[0-9a-fA-F]*")
_ID_KEYS = {"traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"}


class OTLPError(ValueError):
    """Not OTLP trace data (the message says why)."""


@dataclass
class Span:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    error: bool = False
    status_message: str = ""
    events: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)
    scope: str = ""


def traces(data: bytes | str) -> dict[str, list[Span]]:
    """trace id (hex) -> its spans, in the order they came; OTLPError if it is not OTLP."""
    out: dict[str, list[Span]] = {}
    count = 0
    for message in _messages(data):
        for span in _spans(message):
            count += 1
            if count > MAX_SPANS:
                raise OTLPError(f"more than {MAX_SPANS:,} spans; split the file")
            out.setdefault(span.trace_id, []).append(span)
    if not out:
        raise OTLPError("it holds no spans")
    return out


def _messages(data: bytes | str) -> Iterator[ExportTraceServiceRequest]:
    text = data if isinstance(data, str) else None
    if text is None:
        head = data.lstrip()[:1]
        if head in (b"{", b"["):
            text = data.decode("utf-8", errors="replace")
        else:
            try:
                yield ExportTraceServiceRequest.FromString(data)
            except DecodeError as exc:
                raise OTLPError(f"this is not an OTLP or bundle file: neither JSON nor OTLP "
                                f"protobuf (the protobuf reader says: {exc})") from None
            return
    for doc in _documents(text):
        if isinstance(doc, dict) and isinstance(doc.get("data"), list):
            # Phoenix's GET /v1/projects/{project}/spans/otlpv1: a page of OTLP spans
            doc = {"resource_spans": [{"scope_spans": [{"spans": doc["data"]}]}]}
        if not isinstance(doc, dict) or not ({"resourceSpans", "resource_spans"} & set(doc)):
            raise OTLPError("a JSON document without resourceSpans is not an OTLP trace")
        try:
            yield json_format.ParseDict(_ids_to_base64(doc), ExportTraceServiceRequest(),
                                        ignore_unknown_fields=True)
        except json_format.ParseError as exc:
            raise OTLPError(f"not OTLP/JSON: {exc}") from None


def _documents(text: str) -> Iterator[Any]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        lines = [line for line in text.splitlines() if line.strip()]
        try:
            yield from (json.loads(line) for line in lines)
        except json.JSONDecodeError as exc:
            raise OTLPError(f"not JSON: {exc}") from None
        return
    yield from doc if isinstance(doc, list) else [doc]


def _ids_to_base64(value: Any) -> Any:
    """OTLP/JSON ids are hex; protobuf's JSON mapping reads bytes as base64."""
    if isinstance(value, dict):
        return {k: _id(v) if k in _ID_KEYS and isinstance(v, str) else _ids_to_base64(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_ids_to_base64(v) for v in value]
    return value


def _id(text: str) -> str:
    if len(text) in (16, 32) and _HEX.fullmatch(text):
        return base64.b64encode(binascii.unhexlify(text)).decode()
    return text  # already base64 (a protobuf-JSON writer), or empty


def _spans(message: ExportTraceServiceRequest) -> Iterator[Span]:
    for rs in message.resource_spans:
        resource = _attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            for s in ss.spans:
                yield Span(
                    trace_id=s.trace_id.hex(), span_id=s.span_id.hex(),
                    parent_id=s.parent_span_id.hex(), name=s.name,
                    start_ns=s.start_time_unix_nano, end_ns=s.end_time_unix_nano,
                    attributes=_attributes(s.attributes), error=s.status.code == 2,
                    status_message=s.status.message,
                    events=[(e.name, e.time_unix_nano, _attributes(e.attributes))
                            for e in s.events],
                    resource=resource, scope=ss.scope.name)


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


def _value(v: Any) -> Any:
    which = v.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return _attributes(v.kvlist_value.values)
    if which == "bytes_value":
        return base64.b64encode(v.bytes_value).decode()
    return getattr(v, which)
