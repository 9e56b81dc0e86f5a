"""The OTLP import figure of `manage.py bench_traces --only import --import-spans N`.

The file is the bench_traces synthetic run exported as Agent Lab exports a run (traces/otlp:
OpenInference spans; the document the SDK's encoder makes, written directly: `to_json`) in the
OpenTelemetry file format: OTLP JSON lines, an ExportTraceServiceRequest of 512 spans a line
(a batch of the SDK's span processor; the run's root span in the first), made 10,500 steps at
a time, never all at once. It is imported through `streamed.import_path`, what `manage.py
import_run` calls (a file this big streams: read a line at a time, twice), and the figures are
spans/s and the process's peak memory over its resident size before the import (sampled from
/proc, since tracemalloc would slow the import it measures).
"""

from __future__ import annotations

import gc
import json
import os
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from itertools import batched
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from django.conf import settings

from traces.otel import encode
from traces.otel.importer import import_file
from traces.otel.spans import SpanData
from traces.otel.streamed import import_path
from traces.otlp import spans as run_spans

# steps a chunk: a multiple of 350, as the synthetic run's plans are (seq = 1 mod 350), so a
# plan's steps are in its chunk and each span's parent is written as it is
CHUNK = 10_500
LINE_SPANS = 512  # spans a line: a batch of the SDK's BatchSpanProcessor (its default)
# The anchor: a 10,000-span trace sent to the receiver and to Phoenix (bench_ingest, ARCHITECTURE)
INGEST_ANCHOR = "bench_ingest, 1 trace of 10,000 spans: Agent Lab 1,975 spans/s, Phoenix 137"


def write_otlp(path: Path, n: int, steps: Any, t0: float) -> None:
    """`steps` (n-1 synthetic steps, plans every 50) as an OTLP JSON-lines file of n spans."""
    run = SimpleNamespace(pk=10**9 + n, agent_name="bench", paradigm="react",
                          status="succeeded", input=f"bench import ({n} spans)",
                          final_answer="bench answer", error="", agent_snapshot={}, user=None,
                          started_at=datetime.fromtimestamp(t0, tz=UTC),
                          finished_at=datetime.fromtimestamp(t0 + n * 2.0, tz=UTC))
    with path.open("w", encoding="utf-8") as out:
        for i, chunk in enumerate(batched(steps, CHUNK)):
            spans = run_spans(run, chunk)
            # each chunk's spans come with a root span: the first chunk's is the run's
            for line in batched(spans if i == 0 else spans[1:], LINE_SPANS):
                doc = to_json(list(line), settings.AGENTLAB_OTEL_PROJECT)
                out.write(json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n")


def to_json(spans: list[SpanData], project: str) -> dict[str, Any]:
    """encode.to_json's document, written directly: the SDK's encoder and protobuf's JSON
    mapping (pure Python) took 3 ms a span, half an hour for the 1M file
    (tests/test_bench_traces.py checks that the two documents are equal)."""
    res = encode.resource(project)
    return {"resourceSpans": [{
        "resource": {"attributes": _attributes(res.attributes)},
        "scopeSpans": [{"scope": {"name": encode.SCOPE.name, "version": encode.SCOPE.version},
                        "spans": [_span(s) for s in spans]}]}]}


def _span(s: SpanData) -> dict[str, Any]:
    out: dict[str, Any] = {"traceId": f"{s.trace_id:032x}", "spanId": f"{s.span_id:016x}"}
    if s.parent_id is not None:
        out["parentSpanId"] = f"{s.parent_id:016x}"
    out |= {"name": s.name, "kind": 1, "startTimeUnixNano": str(s.start_ns),
            "endTimeUnixNano": str(max(s.end_ns, s.start_ns))}
    if s.attributes:
        out["attributes"] = _attributes(s.attributes)
    if s.events:
        out["events"] = [{"timeUnixNano": str(when), "name": name,
                          **({"attributes": _attributes(a)} if a else {})}
                         for name, when, a in s.events]
    out["status"] = {"code": 1} if s.error is None else (
        {"message": s.error, "code": 2} if s.error else {"code": 2})
    out["flags"] = 256  # SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK, as the SDK's encoder sets
    return out


def _attributes(attributes: Any) -> list[dict[str, Any]]:
    return [{"key": str(k), "value": _value(v)} for k, v in attributes.items()]


def _value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, str):
        return {"stringValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, list | tuple):
        return {"arrayValue": {"values": [_value(x) for x in v]} if v else {}}
    raise TypeError(f"a bench span's attribute of type {type(v).__name__}")


def measure(path: Path, user: Any, discard: Callable[[int], None] | None,
            ) -> dict[str, Any]:
    """Import `path` as `manage.py import_run` does: spans, seconds (and CPU seconds), spans/s,
    peak MiB over before, the run (deleted by `discard` unless None)."""
    gc.collect()
    peak = _Peak()
    started, cpu = time.perf_counter(), time.process_time()
    with peak:
        (run,) = import_path(path, user=user)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    spans = run.step_count + 1  # the root span is the run itself
    if discard is not None:
        discard(run.pk)
    size = path.stat().st_size
    return {"spans": spans, "bytes": size, "seconds": seconds, "cpu_s": cpu,
            "streamed": size >= settings.AGENTLAB_IMPORT_STREAM_FROM_BYTES,
            "rate": spans / seconds, "peak_mib": peak.over_mib, "run": run.pk}


class _Peak:
    """The resident size's peak while inside, over what it was on entry (sampled every 20 ms)."""

    def __enter__(self) -> _Peak:
        self.before = self.top = _rss_kib()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        self.top = max(self.top, _rss_kib())

    def _sample(self) -> None:
        while not self._done.wait(0.02):
            self.top = max(self.top, _rss_kib())

    @property
    def over_mib(self) -> float:
        return (self.top - self.before) / 1024


def _rss_kib() -> int:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def open_trace(otlp: bytes, user: Any, first_byte: Callable[[str], float],
               discard: Callable[[int], None]) -> dict[str, Any]:
    """The anchor's trace opened here: imported as the Import page does, then its run page's
    first byte (`first_byte(url)`, seconds); the run is deleted."""
    from django.urls import reverse

    started = time.perf_counter()
    (run,) = import_file(otlp, user=user)
    imported = time.perf_counter() - started
    try:
        page = first_byte(reverse("run", args=[run.pk]))
    finally:
        discard(run.pk)
    return {"import_s": imported, "page_s": page, "steps": run.step_count}


def report_anchor(out: Callable[[str], None], phoenix: dict[str, Any],
                  ours: list[dict[str, Any]]) -> None:
    """The same trace in Agent Lab and in Phoenix, side by side."""
    if "skipped" in phoenix:
        out(f"Phoenix anchor: skipped: {phoenix['skipped']}")
        return
    out(f"The same trace opened in Agent Lab and in Phoenix {phoenix['version']} (this machine)")
    out(f"  {'spans':>8}  {'Agent Lab: import + run page':>30}  "
        f"{'Phoenix: sent → counted → all read':>36}")
    for theirs, mine in zip(phoenix["traces"], ours, strict=True):
        lab = f"{mine['import_s']:.1f} s + {mine['page_s'] * 1000:.0f} ms"
        if theirs["seconds"] is None:
            them = f"not all within {theirs['sent_s'] + (theirs['counted_s'] or 0):.0f} s"
        else:
            them = (f"{theirs['seconds']:.1f} s ({theirs['sent_s']:.1f} → "
                    f"{theirs['counted_s']:.1f} → +{theirs['read_s']:.1f})")
        out(f"  {theirs['spans']:>8,}  {lab:>30}  {them:>36}")
    out("  Agent Lab: the OTLP imported as the Import page does, then the run page's first "
        "byte; Phoenix: from the first request until its API gives every span of the trace")


def report(out: Callable[[str], None], figures: dict[str, Any]) -> None:
    how = "streamed" if figures["streamed"] else "read whole"
    out(f"OTLP import of {figures['spans']:,} spans ({figures['bytes'] / 2**20:,.1f} MiB of "
        f"OTLP JSON lines, {how}, through import_run's importer): {figures['seconds']:.1f} s "
        f"({figures['cpu_s']:.1f} s CPU), {figures['rate']:,.0f} spans/s, peak memory "
        f"+{figures['peak_mib']:,.0f} MiB")
    out(f"  goal: spans/s and peak memory printed for 1,000,000 spans (issue 37); anchor: "
        f"{INGEST_ANCHOR}")
    if figures["spans"] < 1_000_000:
        out("  the 1M figure: manage.py bench_traces --only import --import-spans 1000000")
