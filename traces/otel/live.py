"""Live export: every run's spans to OTEL_EXPORTER_OTLP_ENDPOINT as the run goes.

The official SDK does the sending: a BatchSpanProcessor (a bounded queue, a background thread,
batches every OTEL_BSP_SCHEDULE_DELAY ms) in front of the OTLP/HTTP protobuf exporter, which
reads the endpoint, OTEL_EXPORTER_OTLP_HEADERS (Phoenix's or Langfuse's auth), the timeout and
compression from the environment itself. A run only hands finished spans to the queue: it
never waits for the network, and a collector that is down or slow costs it nothing (a full
queue drops spans; the SDK says so in the log). Every batch's outcome is counted in STATS,
shown to staff on /runs/otel/.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from traces.redact import redact_text

log = logging.getLogger(__name__)


@dataclass
class Stats:
    """What live export did since this process started (one lock: the exporter's thread and
    the runs' loop both write)."""

    queued: int = 0  # spans handed to the processor
    sent: int = 0  # spans the collector accepted
    failed: int = 0  # spans in batches that failed
    failed_batches: int = 0
    build_errors: int = 0  # spans that could not even be built (a bug: logged, run unharmed)
    last_error: str = ""
    last_error_at: float | None = None
    last_sent_at: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **counts: int) -> None:
        with self.lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)

    def error(self, message: str, *, spans: int = 0) -> None:
        with self.lock:
            self.failed += spans
            self.failed_batches += 1 if spans else 0
            self.last_error, self.last_error_at = redact_text(message)[:500], time.time()

    def reset(self) -> None:
        with self.lock:
            for name in ("queued", "sent", "failed", "failed_batches", "build_errors"):
                setattr(self, name, 0)
            self.last_error, self.last_error_at, self.last_sent_at = "", None, None

    def as_dict(self) -> dict[str, Any]:
        with self.lock:
            return {k: v for k, v in vars(self).items() if k != "lock"}


STATS = Stats()


class CountingExporter(SpanExporter):
    """The SDK's exporter, with every batch's outcome counted (it only logs failures)."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception as exc:  # the SDK's exporters return FAILURE; a custom one may raise
            STATS.error(f"{type(exc).__name__}: {exc}", spans=len(spans))
            return SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            STATS.add(sent=len(spans))
            with STATS.lock:
                STATS.last_sent_at = time.time()
        else:
            STATS.error(f"the collector refused or could not be reached at {endpoint()} "
                        "(the server log has the SDK's reason)", spans=len(spans))
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.inner.force_flush(timeout_millis)


_PROCESSOR: BatchSpanProcessor | None = None
_LOCK = threading.Lock()


def enabled() -> bool:
    return bool(settings.AGENTLAB_OTEL_LIVE)


def endpoint() -> str:
    """Where spans go, credentials removed (for the status page and errors)."""
    url = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or ""
    if not url and (base := os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")):
        url = base.rstrip("/") + "/v1/traces"
    return redact_text(url)


def processor() -> BatchSpanProcessor | None:
    """This process's processor, made on first use; None while live export is off."""
    global _PROCESSOR
    if not enabled():
        return None
    with _LOCK:
        if _PROCESSOR is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            _PROCESSOR = BatchSpanProcessor(CountingExporter(OTLPSpanExporter()))
            atexit.register(_PROCESSOR.shutdown)
        return _PROCESSOR


def submit(span: ReadableSpan) -> None:
    """Queue one finished span (returns at once; sending is the processor's thread's)."""
    if (p := processor()) is not None:
        p.on_end(span)
        STATS.add(queued=1)


def flush(timeout_s: float = 30.0) -> bool:
    """Send what is queued now (tests, shutdown)."""
    return _PROCESSOR.force_flush(int(timeout_s * 1000)) if _PROCESSOR is not None else True


def reset() -> None:
    """Drop this process's processor (after the settings changed: tests)."""
    global _PROCESSOR
    with _LOCK:
        if _PROCESSOR is not None:
            _PROCESSOR.shutdown()
        _PROCESSOR = None
