"""OTLP trace data -> plain spans, grouped by trace (pure).

Takes what collectors and tools write: an ExportTraceServiceRequest in protobuf, OTLP/JSON
(lowerCamelCase or the proto's snake_case names, ids in hex as the OTLP spec says), several
such documents one per line (the collector's file exporter), a JSON list of them, or a page of
Phoenix's span API (`{"data": [span, …]}` from /v1/projects/{project}/spans/otlpv1).
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

MAX_SPANS = 100_000  # as many as a bundle may have steps
MAX_NESTING = 32  # array and kvlist values inside each other
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
    scope_version: str = ""
    links: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)  # trace, span


@dataclass(frozen=True)
class Limits:
    """How many of each repeated thing an upload may hold (settings AGENTLAB_OTLP_MAX_*).

    They are counted before anything is built from them: in protobuf on the wire itself
    (`count_wire`, before the parser allocates a message per item), in JSON on the parsed
    document (`count_json`, before it becomes messages and spans)."""

    attributes: int = 10_000  # of one span, event, link, resource or scope
    events: int = 10_000  # of one span
    links: int = 1_000  # of one span
    values: int = 10_000  # items of one array or kvlist value
    total: int = 5_000_000  # attributes + events + links + values of the whole upload


# What each repeated field is, by message: field number (protobuf) and names (JSON) -> (what it
# counts as, the message it holds).
_REQUEST, _RESOURCE_SPANS, _RESOURCE, _SCOPE_SPANS, _SCOPE, _SPAN, _EVENT, _LINK, _KV, _ANY, \
    _ARRAY, _KVLIST = range(12)
_SCHEMA: dict[int, dict[int, tuple[str, str, int]]] = {
    # message: {field number: (json name, counted as ("": not counted), child message)}
    _REQUEST: {1: ("resourceSpans", "", _RESOURCE_SPANS)},
    _RESOURCE_SPANS: {1: ("resource", "", _RESOURCE), 2: ("scopeSpans", "", _SCOPE_SPANS)},
    _RESOURCE: {1: ("attributes", "attributes", _KV)},
    _SCOPE_SPANS: {1: ("scope", "", _SCOPE), 2: ("spans", "", _SPAN)},
    _SCOPE: {3: ("attributes", "attributes", _KV)},
    _SPAN: {9: ("attributes", "attributes", _KV), 11: ("events", "events", _EVENT),
            13: ("links", "links", _LINK)},
    _EVENT: {3: ("attributes", "attributes", _KV)},
    _LINK: {4: ("attributes", "attributes", _KV)},
    _KV: {2: ("value", "", _ANY)},
    _ANY: {5: ("arrayValue", "", _ARRAY), 6: ("kvlistValue", "", _KVLIST)},
    _ARRAY: {1: ("values", "values", _ANY)},
    _KVLIST: {1: ("values", "values", _KV)},
}
_WHAT = {"attributes": "attributes", "events": "events", "links": "links",
         "values": "items in one array or kvlist value"}
_SETTING = {"attributes": "AGENTLAB_OTLP_MAX_ATTRIBUTES", "events": "AGENTLAB_OTLP_MAX_EVENTS",
            "links": "AGENTLAB_OTLP_MAX_LINKS", "values": "AGENTLAB_OTLP_MAX_VALUES"}


_WHERE = {_RESOURCE: "a resource", _SCOPE: "a scope", _SPAN: "a span", _EVENT: "a span's event",
          _LINK: "a span's link", _ARRAY: "an attribute's value", _KVLIST: "an attribute's value"}


class Counter:
    def __init__(self, limits: Limits) -> None:
        self.limits, self.total = limits, 0

    def check(self, kind: int, what: str, count: int, added: int = 1) -> None:
        """`count` items of `what` in one message of `kind` so far, `added` of them new."""
        limit = getattr(self.limits, what)
        if count > limit:
            raise OTLPError(f"{_WHERE[kind]} holds more than {limit:,} {_WHAT[what]} (the "
                            f"limit, {_SETTING[what]}); nothing was imported")
        self.total += added
        if self.total > self.limits.total:
            raise OTLPError(f"the upload holds more than {self.limits.total:,} attributes, "
                            "events, links and values (the limit, AGENTLAB_OTLP_MAX_ITEMS); "
                            "split it")


def count_wire(data: bytes, counter: Counter) -> None:
    """Count every repeated field of an ExportTraceServiceRequest on the wire, without
    building a message: OTLPError at the first count over its limit. Only the messages that
    hold counted fields are entered; everything else is skipped by its length. (It runs for
    every request, so the usual cases are read inline: one- and two-byte lengths, and an
    attribute whose value is one plain field, settled without entering it.)"""
    limits = {what: getattr(counter.limits, what) for what in _WHAT}
    most, total = counter.limits.total, counter.total
    # (message kind, position, end, depth, counts of this message)
    stack: list[tuple[int, int, int, int, dict[str, int]]] = [(_REQUEST, 0, len(data), 0, {})]
    while stack:
        kind, pos, end, depth, counts = stack.pop()
        fields = _SCHEMA[kind]
        while pos < end:
            key = data[pos]
            if key < 0x80:
                pos += 1
            else:
                key, pos = _varint(data, pos, end)
            wire = key & 7
            if wire == 2:
                size = data[pos] if pos < end else 0x80
                if size < 0x80:
                    pos += 1
                elif pos + 1 < end and data[pos + 1] < 0x80:
                    size = (size & 0x7F) | (data[pos + 1] << 7)
                    pos += 2
                else:
                    size, pos = _varint(data, pos, end)
                child = fields.get(key >> 3)
                if child is not None:
                    _, what, child_kind = child
                    if what:
                        n = counts[what] = counts.get(what, 0) + 1
                        if n > limits[what] or total >= most:
                            counter.total = total
                            counter.check(kind, what, n)  # raises, saying which limit
                        total += 1
                    if child_kind in (_ANY, _ARRAY, _KVLIST, _KV) and depth > MAX_NESTING:
                        raise OTLPError(f"attribute values nested more than {MAX_NESTING} "
                                        "levels deep")
                    if child_kind == _KV and _plain_value(data, pos, pos + size):
                        pos += size
                        continue
                    if size:
                        stack.append((kind, pos + size, end, depth, counts))
                        kind, end, depth, counts = child_kind, pos + size, depth + 1, {}
                        fields = _SCHEMA[kind]
                        if end > len(data):
                            raise OTLPError("neither JSON nor OTLP protobuf (a field runs "
                                            "past the end)")
                        continue
                pos += size
            elif wire == 0:
                if pos < end and data[pos] < 0x80:
                    pos += 1
                else:
                    _, pos = _varint(data, pos, end)
            elif wire == 1:
                pos += 8
            elif wire == 5:
                pos += 4
            else:
                raise OTLPError(f"neither JSON nor OTLP protobuf (wire type {wire})")
        if pos > end:
            raise OTLPError("neither JSON nor OTLP protobuf (a field runs past the end)")
    counter.total = total


def _plain_value(data: bytes, pos: int, end: int) -> bool:
    """Is the KeyValue at data[pos:end] a key of one-byte length and a value that is exactly
    one field, neither an array nor a kvlist (the usual attribute: settled by a few bytes
    instead of entering the message)? A value holding a second field after a plain one is
    entered: protobuf takes the last, which may be an array to count."""
    if end - pos < 4 or end > len(data) or data[pos] != 0x0A or data[pos + 1] >= 0x80:
        return False  # (past the data's end: entered, and refused there)
    at = pos + 2 + data[pos + 1]  # the value: tag 0x12, its length, then AnyValue's one field
    if at + 3 > end or data[at] != 0x12:
        return False
    length = data[at + 1]
    if length < 0x80:
        at += 2
    elif data[at + 2] < 0x80:
        length = (length & 0x7F) | (data[at + 2] << 7)
        at += 3
    else:
        return False
    if at + length != end or at >= end:
        return False
    tag = data[at]
    if tag in (0x0A, 0x3A):  # string_value, bytes_value: one length-delimited field
        size = data[at + 1] if at + 1 < end else 0x80
        if size < 0x80:
            return at + 2 + size == end
        if at + 2 < end and data[at + 2] < 0x80:
            return at + 3 + ((size & 0x7F) | (data[at + 2] << 7)) == end
        return False
    if tag in (0x10, 0x18):  # bool_value, int_value: one varint
        at += 1
        while at < end and data[at] >= 0x80:
            at += 1
        return at + 1 == end
    return tag == 0x21 and at + 9 == end  # double_value


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise OTLPError("neither JSON nor OTLP protobuf (a number runs past its end)")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def count_json(doc: Any, counter: Counter) -> None:
    """The same counts on an OTLP/JSON document (lowerCamelCase or snake_case names)."""
    stack: list[tuple[int, Any, int]] = [(_REQUEST, doc, 0)]
    while stack:
        kind, message, depth = stack.pop()
        if not isinstance(message, dict):
            continue
        for name, what, child_kind in _SCHEMA[kind].values():
            value = message.get(name, message.get(_snake(name)))
            if value is None:
                continue
            if child_kind in (_ANY, _ARRAY, _KVLIST, _KV) and depth > MAX_NESTING:
                raise OTLPError(f"attribute values nested more than {MAX_NESTING} levels deep")
            items = value if isinstance(value, list) else [value]
            if what:
                counter.check(kind, what, len(items), added=len(items))
            stack.extend((child_kind, item, depth + 1) for item in items)


@functools.cache
def _snake(name: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m[1].lower(), name)


def traces(data: bytes | str, limits: Limits | None = None, *,
           allow_empty: bool = False) -> dict[str, list[Span]]:
    """trace id (hex) -> its spans, in the order they came; OTLPError if it is not OTLP, or
    if it holds more of something than `limits` allow, or no spans (unless `allow_empty`: an
    exporter may send a request with none)."""
    out: dict[str, list[Span]] = {}
    count = 0
    for message in _messages(data, limits or Limits()):
        for span in spans_of(message):
            count += 1
            if count > MAX_SPANS:
                raise OTLPError(f"more than {MAX_SPANS:,} spans; split the file")
            out.setdefault(span.trace_id, []).append(span)
    if not out and not allow_empty:
        raise OTLPError("it holds no spans")
    return out


def _messages(data: bytes | str, limits: Limits) -> Iterator[ExportTraceServiceRequest]:
    counter = Counter(limits)
    text = data if isinstance(data, str) else None
    if text is None:
        head = data.lstrip()[:1]
        if head in (b"{", b"["):
            text = data.decode("utf-8", errors="replace")
        else:
            count_wire(data, counter)
            try:
                yield ExportTraceServiceRequest.FromString(data)
            except DecodeError as exc:
                raise OTLPError(f"this is not an OTLP or bundle file: neither JSON nor OTLP "
                                f"protobuf (the protobuf reader says: {exc})") from None
            return
    for doc in _documents(text):
        yield request_of(doc, counter)


def request_of(doc: Any, counter: Counter) -> ExportTraceServiceRequest:
    """One parsed OTLP/JSON document as a request, its items counted first (`counter`)."""
    if isinstance(doc, dict) and isinstance(doc.get("data"), list):
        # Phoenix's GET /v1/projects/{project}/spans/otlpv1: a page of OTLP spans
        doc = {"resource_spans": [{"scope_spans": [{"spans": doc["data"]}]}]}
    if not isinstance(doc, dict) or not ({"resourceSpans", "resource_spans"} & set(doc)):
        raise OTLPError("a JSON document without resourceSpans is not an OTLP trace")
    count_json(doc, counter)
    try:
        return json_format.ParseDict(_ids_to_base64(doc), ExportTraceServiceRequest(),
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


def spans_of(message: ExportTraceServiceRequest) -> Iterator[Span]:
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
                    resource=resource, scope=ss.scope.name, scope_version=ss.scope.version,
                    links=[(link.trace_id.hex(), link.span_id.hex(),
                            _attributes(link.attributes)) for link in s.links])


def _attributes(pairs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in pairs:  # the usual text value inline: ten or more a span, every span decoded
        v = kv.value
        which = v.WhichOneof("value")
        out[kv.key] = v.string_value if which == "string_value" else _value(v, which)
    return out


def _value(v: Any, which: str | None = "") -> Any:
    if which == "":
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
