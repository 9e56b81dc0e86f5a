"""OTLP/HTTP as its specification says (pure): a request's body read within limits, and replies.

opentelemetry-proto docs/specification.md, "OTLP/HTTP": the encoding is the Content-Type
(binary protobuf or JSON), the body may be gzip-compressed, its size is limited also after
decompression (413, never retried), and the reply uses the request's encoding: an
`ExportTraceServiceResponse` on success (with `partial_success` when spans were rejected), a
`google.rpc.Status` for every 4xx and 5xx. 429, 502, 503 and 504 are the retryable ones; 429 and
503 may carry Retry-After, which the SDK's exporter honours.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, NamedTuple

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

Encoding = Literal["protobuf", "json"]
CONTENT_TYPES: dict[Encoding, str] = {"protobuf": "application/x-protobuf",
                                      "json": "application/json"}
_BY_MEDIA_TYPE: dict[str, Encoding] = {media: enc for enc, media in CONTENT_TYPES.items()}
# What the specification tells clients to retry; every other 4xx and 5xx is final.
RETRYABLE = frozenset({429, 502, 503, 504})
# google.rpc.Code of each status (the spec leaves Status.code optional; collectors set it).
_RPC_CODES = {400: 3, 401: 16, 403: 7, 404: 5, 405: 12, 413: 3, 415: 3, 429: 8, 500: 13,
              502: 14, 503: 14, 504: 4}
# Compressed input fed and output taken per step: what inflating holds beyond its result.
_CHUNK = 64 * 1024
_GZIP_WBITS, _ZLIB_WBITS, _RAW_WBITS = 16 + zlib.MAX_WBITS, zlib.MAX_WBITS, -zlib.MAX_WBITS


class ProtocolError(Exception):
    """The request cannot be taken; `status` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class Request:
    data: bytes  # decompressed: an ExportTraceServiceRequest in `encoding`
    encoding: Encoding


class Reply(NamedTuple):
    status: int
    body: bytes
    content_type: str
    headers: dict[str, str]  # beyond Content-Type: Retry-After where there is one


def check_length(headers: Mapping[str, str], *, max_bytes: int) -> None:
    """Refuse (413) a body whose Content-Length is over `max_bytes` before it is read."""
    declared = _lower(headers).get("content-length", "").strip()
    if declared.isdigit() and int(declared) > max_bytes:
        raise ProtocolError(413, _too_large("body", int(declared), max_bytes))


def read_body(headers: Mapping[str, str], body: bytes, *, max_bytes: int,
              max_inflated: int) -> Request:
    """The request's payload, decompressed, and its encoding; ProtocolError when it is not one
    this server takes: 415 (content type or encoding), 413 (over a limit), 400 (corrupt)."""
    fields = _lower(headers)
    encoding = _encoding(fields.get("content-type", ""))
    if len(body) > max_bytes:
        raise ProtocolError(413, _too_large("body", len(body), max_bytes))
    return Request(_decompress(fields.get("content-encoding", ""), body, max_inflated), encoding)


def reply_encoding(headers: Mapping[str, str]) -> Encoding:
    """The encoding to answer in: the request's, or protobuf when it has none we take."""
    media = _lower(headers).get("content-type", "").partition(";")[0].strip().lower()
    return _BY_MEDIA_TYPE.get(media, "protobuf")


def reply(encoding: Encoding, *, rejected: int = 0, message: str = "") -> Reply:
    """200 with an ExportTraceServiceResponse: full success, or partial success when spans were
    rejected (or a warning is given: `rejected` 0 and a message)."""
    response = ExportTraceServiceResponse()
    if rejected or message:
        response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = message or f"{rejected} spans were rejected."
    if encoding == "json":
        body = json.dumps(json_format.MessageToDict(response), separators=(",", ":")).encode()
    else:
        body = response.SerializeToString()
    return Reply(200, body, CONTENT_TYPES[encoding], {})


def error_reply(encoding: Encoding, status: int, message: str,
                retry_after: float | None = None) -> Reply:
    """A 4xx/5xx with a google.rpc.Status body; Retry-After in whole seconds (at least 1)."""
    code = _RPC_CODES.get(status, 13 if status >= 500 else 3)
    if encoding == "json":
        body = json.dumps({"code": code, "message": message}, separators=(",", ":")).encode()
    else:
        body = _status_protobuf(code, message)
    headers = {} if retry_after is None else {"Retry-After": str(max(1, math.ceil(retry_after)))}
    return Reply(status, body, CONTENT_TYPES[encoding], headers)


def _status_protobuf(code: int, message: str) -> bytes:
    # google.rpc.Status by hand (its module, googleapis-common-protos, is not one of our pinned
    # dependencies): field 1 int32 code, field 2 string message; details (3) left out.
    text = message.encode()
    return b"\x08" + _varint(code) + b"\x12" + _varint(len(text)) + text


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _lower(headers: Mapping[str, str]) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


def _shown(value: str) -> str:
    return repr(value[:80] + ("…" if len(value) > 80 else ""))


def _too_large(what: str, size: int, limit: int) -> str:
    return f"The {what} is {size:,} bytes or more; this server takes at most {limit:,}."


def _encoding(content_type: str) -> Encoding:
    media = content_type.partition(";")[0].strip().lower()  # parameters (charset) don't matter
    if media not in _BY_MEDIA_TYPE:
        raise ProtocolError(415, "OTLP/HTTP takes Content-Type application/x-protobuf or "
                                 f"application/json, not {_shown(content_type)}.")
    return _BY_MEDIA_TYPE[media]


def _decompress(content_encoding: str, body: bytes, limit: int) -> bytes:
    name = content_encoding.strip().lower()
    if name in ("", "identity"):
        if len(body) > limit:
            raise ProtocolError(413, _too_large("body", len(body), limit))
        return body
    if name == "gzip":
        return _inflate(body, _GZIP_WBITS, limit, "gzip")
    if name == "deflate":
        # HTTP's deflate is the zlib format (what the SDK sends); some clients send it raw.
        zlib_header = len(body) >= 2 and body[0] & 0x0F == 8 and (body[0] << 8 | body[1]) % 31 == 0
        return _inflate(body, _ZLIB_WBITS if zlib_header else _RAW_WBITS, limit, "deflate")
    raise ProtocolError(415, "OTLP/HTTP takes Content-Encoding gzip, deflate or none, not "
                             f"{_shown(content_encoding)}.")


def _inflate(body: bytes, wbits: int, limit: int, name: str) -> bytes:
    """`body` inflated, refused (413) as soon as the output passes `limit`: a small body that
    inflates to gigabytes (a "zip bomb") costs at most `limit` bytes, never its full size."""
    inflater = zlib.decompressobj(wbits)
    view = memoryview(body)
    out = bytearray()
    taken = 0  # bytes of `body` handed to the inflater
    pending: bytes | memoryview = b""
    while not inflater.eof:
        if not pending and taken < len(view):
            pending = view[taken:taken + _CHUNK]
            taken += len(pending)
        try:
            piece = inflater.decompress(pending, _CHUNK)
        except zlib.error as exc:
            raise ProtocolError(400, f"The body is not valid {name} ({exc}).") from None
        out += piece
        if len(out) > limit:
            raise ProtocolError(413, _too_large(f"body once {name}-decompressed", len(out), limit))
        if not piece and len(inflater.unconsumed_tail) == len(pending):  # no input left
            raise ProtocolError(400, f"The {name} body ends before its stream does.")
        pending = inflater.unconsumed_tail
    if inflater.unused_data or taken < len(view):
        raise ProtocolError(400, f"The body has data after the end of its {name} stream.")
    return bytes(out)
