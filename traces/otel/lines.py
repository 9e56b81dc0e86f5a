"""An OTLP file in the OpenTelemetry file format, read a line at a time (pure but for reading
the file): JSON lines, each an ExportTraceServiceRequest in OTLP/JSON, as the SDKs' file
exporters and the collector's fileexporter write them. Only one line's text and spans are
held at a time; each line's items are counted against the AGENTLAB_OTLP_MAX_* limits before
it becomes spans, and an error names the line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from traces.otel import json_spans
from traces.otel.decode import Counter, Limits, OTLPError, Span, count_json, request_of, spans_of

MAX_LINE_BYTES = 512 * 1024 * 1024  # one request's JSON: the collector writes one a batch


def is_json_lines(path: Path) -> bool:
    """Does the file's first line that is not blank hold a whole OTLP/JSON request? (One
    document written over many lines does not: it is read whole.)"""
    with path.open("rb") as f:
        while (first := f.readline(MAX_LINE_BYTES)) and not first.strip():
            pass
    if not first.lstrip().startswith(b"{"):
        return False
    try:
        doc = json.loads(first)
    except ValueError:
        return False
    return isinstance(doc, dict) and bool({"resourceSpans", "resource_spans"} & set(doc))


def requests(path: Path, limits: Limits | None) -> Iterator[tuple[int, list[Span]]]:
    """(line number, its spans) for each line that is not blank; OTLPError naming the line
    when one is not an OTLP/JSON request or holds more than `limits` allow (None: counted
    already, by an earlier pass over the same file)."""
    with path.open("rb") as f:
        number = 0
        while line := f.readline(MAX_LINE_BYTES + 1):
            number += 1
            if len(line) > MAX_LINE_BYTES:
                raise OTLPError(f"line {number:,} is longer than {MAX_LINE_BYTES // 2**20:,} "
                                "MiB; write the spans in smaller requests (a line each)")
            if not line.strip():
                continue
            try:
                doc = json.loads(line.rstrip(b"\r\n"))
            except json.JSONDecodeError as exc:
                raise OTLPError(f"line {number:,} is not JSON: {exc.msg} (column "
                                f"{exc.colno:,})") from None
            except UnicodeDecodeError as exc:
                raise OTLPError(f"line {number:,} is not JSON: it is not UTF-8 (byte "
                                f"{exc.start + 1:,} of the line)") from None
            try:
                yield number, _spans(doc, limits)
            except OTLPError as exc:
                raise OTLPError(f"line {number:,}: {exc}") from None


def _spans(doc: Any, limits: Limits | None) -> list[Span]:
    """A line's spans, its items counted first: read directly (json_spans) where it has the
    usual shape, else through protobuf's parser, which also says what is wrong."""
    counter = Counter(limits or Limits(*[2**62] * 5))
    if isinstance(doc, dict) and {"resourceSpans", "resource_spans"} & set(doc):
        if limits is not None:
            count_json(doc, counter)
        if (found := json_spans.spans(doc)) is not None:
            return found
    return list(spans_of(request_of(doc, counter)))
