"""A run as OTLP spans in OpenInference conventions, for Phoenix, Langfuse and any collector:
OTLP/JSON (hex ids) or protobuf, both through the OpenTelemetry SDK's encoder.

Ids are an HMAC of the run id under this installation's key (traces.otel.ids): exporting
twice gives the same ids, another installation's run 1 never the same. Credentials in URLs are
removed (traces.redact), as in a bundle. The mapping: traces.otel.spans and .attributes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings

from traces.otel import encode, ids
from traces.otel.spans import SpanData, run_info, run_spans
from traces.redact import redact_urls


def trace_id(run_id: Any) -> str:
    return ids.hex_trace(ids.trace_id(run_id))


def span_id(run_id: Any, seq: int) -> str:
    """seq 0 is the run's root span."""
    return ids.hex_span(ids.span_id(run_id, seq))


def spans(run: Any, steps: Iterable[Any]) -> list[SpanData]:
    """The run's spans, credentials out of every URL they hold."""
    out = run_spans(run_info(run), steps)
    for span in out:
        span.attributes = redact_urls(span.attributes)
        span.events = redact_urls(span.events)
        span.error = redact_urls(span.error)
    return out


def export_otlp(run: Any, steps: Iterable[Any]) -> dict[str, Any]:
    """The OTLP/JSON document (`resourceSpans` -> `scopeSpans` -> `spans`) of one run."""
    return encode.to_json(spans(run, steps), settings.AGENTLAB_OTEL_PROJECT)


def export_otlp_protobuf(run: Any, steps: Iterable[Any]) -> bytes:
    """The same spans as an ExportTraceServiceRequest in protobuf (application/x-protobuf)."""
    return encode.to_protobuf(spans(run, steps), settings.AGENTLAB_OTEL_PROJECT)
