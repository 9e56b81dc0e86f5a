"""PLACEHOLDER (replaced by branch proto at merge)."""
from __future__ import annotations

import gzip
from collections.abc import Mapping
from dataclasses import dataclass


class ProtocolError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


@dataclass
class Request:
    data: bytes
    encoding: str


def encoding_of(headers: Mapping[str, str]) -> str:
    kind = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
    return "json" if kind == "application/json" else "protobuf"


def read_body(headers: Mapping[str, str], body: bytes, *, max_bytes: int,
              max_inflated: int) -> Request:
    if (headers.get("Content-Encoding") or "").lower() == "gzip":
        body = gzip.decompress(body)
    return Request(body, encoding_of(headers))


def reply(encoding: str, *, rejected: int = 0, message: str = "") -> tuple[int, bytes, str]:
    import json
    if encoding == "json":
        doc = {"partialSuccess": {"rejectedSpans": rejected, "errorMessage": message}} if rejected or message else {}
        return 200, json.dumps(doc).encode(), "application/json"
    return 200, b"", "application/x-protobuf"


def error_reply(encoding: str, status: int, message: str, retry_after: int | None = None):
    import json
    headers = {"Retry-After": str(retry_after)} if retry_after else {}
    return status, json.dumps({"code": status, "message": message}).encode(), "application/json", headers
