"""An OTLP/JSON request -> its spans directly (pure): the spans `decode.spans_of` makes of the
same request after protobuf's JSON parser, without that parser, which is written in Python and
took 80% of a big file's import. Only the usual shapes are read here (either naming, ids in hex,
numbers as JSON numbers or strings of digits, the status code as a number or its name); any
other value (a null, base64 ids, bytes, a number written otherwise) makes `spans` answer None,
and the caller hands the request to protobuf's parser (decode.request_of), whose answer or
error is then the one given."""

from __future__ import annotations

import re
from typing import Any

from traces.otel.decode import Span

_MISSING = object()
_HEX_ID = re.compile(r"(?:[0-9a-fA-F]{16}){1,2}")
_STATUS = {0: 0, 1: 1, 2: 2, "STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
_SPECIAL = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
_INT = re.compile(r"-?[0-9]+")


class _Irregular(Exception):
    """A value this reader leaves to protobuf's parser."""


def spans(doc: Any) -> list[Span] | None:
    """The request's spans, or None when it holds something only protobuf's parser reads."""
    try:
        return list(_request(doc))
    except _Irregular:
        return None


def _field(message: Any, camel: str, snake: str, default: Any) -> Any:
    if not isinstance(message, dict):
        raise _Irregular
    value = message.get(camel, _MISSING)
    if snake != camel and snake in message:
        if value is not _MISSING:
            raise _Irregular  # both names: protobuf's parser says which it refuses
        value = message[snake]
    if value is _MISSING:
        return default
    if value is None:
        raise _Irregular
    return value


def _list(message: Any, camel: str, snake: str) -> list[Any]:
    value = _field(message, camel, snake, [])
    if not isinstance(value, list):
        raise _Irregular
    return value


def _text(message: Any, name: str) -> str:
    value = _field(message, name, name, "")
    if not isinstance(value, str):
        raise _Irregular
    return value


def _int(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _INT.fullmatch(value):
        return int(value)
    raise _Irregular


def _id(message: Any, camel: str, snake: str) -> str:
    value = _field(message, camel, snake, "")
    if value == "":
        return ""
    if not isinstance(value, str) or not _HEX_ID.fullmatch(value):
        raise _Irregular  # base64 (protobuf's own JSON writer): its parser reads that
    return value.lower()


def _request(doc: Any) -> Any:
    if isinstance(doc, dict) and isinstance(doc.get("data"), list):
        raise _Irregular  # Phoenix's page of spans: decode.request_of knows it
    for rs in _list(doc, "resourceSpans", "resource_spans"):
        resource = _attributes(_field(rs, "resource", "resource", {}))
        for ss in _list(rs, "scopeSpans", "scope_spans"):
            scope = _field(ss, "scope", "scope", {})
            name, version = _text(scope, "name"), _text(scope, "version")
            for s in _list(ss, "spans", "spans"):
                status = _field(s, "status", "status", {})
                code = _field(status, "code", "code", 0)
                if isinstance(code, bool) or not isinstance(code, int | str) \
                        or code not in _STATUS:  # 1.0 == 1: protobuf's parser decides
                    raise _Irregular
                yield Span(
                    trace_id=_id(s, "traceId", "trace_id"), span_id=_id(s, "spanId", "span_id"),
                    parent_id=_id(s, "parentSpanId", "parent_span_id"), name=_text(s, "name"),
                    start_ns=_int(_field(s, "startTimeUnixNano", "start_time_unix_nano", 0)),
                    end_ns=_int(_field(s, "endTimeUnixNano", "end_time_unix_nano", 0)),
                    attributes=_attributes(s), error=_STATUS[code] == 2,
                    status_message=_text(status, "message"),
                    events=[(_text(e, "name"),
                             _int(_field(e, "timeUnixNano", "time_unix_nano", 0)),
                             _attributes(e)) for e in _list(s, "events", "events")],
                    resource=resource, scope=name, scope_version=version,
                    links=[(_id(link, "traceId", "trace_id"), _id(link, "spanId", "span_id"),
                            _attributes(link)) for link in _list(s, "links", "links")])


def _attributes(message: Any) -> dict[str, Any]:
    out = {}
    for kv in _list(message, "attributes", "attributes"):
        out[_text(kv, "key")] = _value(_field(kv, "value", "value", {}))
    return out


def _value(v: Any) -> Any:
    if not isinstance(v, dict) or len(v) > 1:
        raise _Irregular  # two of the oneof: protobuf's parser refuses it
    if not v:
        return None
    ((name, value),) = v.items()
    if value is None:
        raise _Irregular
    if name in ("stringValue", "string_value"):
        if isinstance(value, str):
            return value
    elif name in ("boolValue", "bool_value"):
        if isinstance(value, bool):
            return value
    elif name in ("intValue", "int_value"):
        return _int(value)
    elif name in ("doubleValue", "double_value"):
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if value in _SPECIAL:
            return _SPECIAL[value]
    elif name in ("arrayValue", "array_value"):
        return [_value(x) for x in _list(value, "values", "values")]
    elif name in ("kvlistValue", "kvlist_value"):
        return _attributes({"attributes": _list(value, "values", "values")})
    raise _Irregular  # bytes, an unknown field, a value of another type
