"""`manage.py bench_otel [--steps N] [--messages M]`: what live export costs a run.

N synthetic steps (alternating LLM calls with M-message requests and tool calls) go through
the live sink into a BatchSpanProcessor whose exporter encodes each batch to OTLP protobuf
and drops it (no network): the wall and CPU time per step on the run's side, then the time
to encode and hand over the batches (the processor's thread)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from django.core.management.base import BaseCommand
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from traces.otel import live
from traces.otel.spans import RunInfo
from traces.otel.stream import LiveSink
from traces.schema import Step


class _Encoding(SpanExporter):
    def __init__(self) -> None:
        self.spans, self.bytes, self.seconds = 0, 0, 0.0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        started = time.perf_counter()
        self.bytes += len(encode_spans(spans).SerializeToString())
        self.seconds += time.perf_counter() - started
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


def _steps(n: int, messages: int) -> list[Step]:
    request = {"messages": [{"role": "user" if i % 2 else "assistant", "content": "word " * 80}
                            for i in range(messages)],
               "tools": [{"type": "function", "function": {"name": "calculator"}}]}
    start, out = time.time(), []
    for seq in range(1, n + 1):
        if seq % 2:
            out.append(Step(seq=seq, kind="llm", name="m", input=request, text="x",
                            output={"text": "x", "model": "m", "tool_calls": [
                                {"id": f"c{seq}", "name": "calculator", "raw_arguments": "{}"}]},
                            tokens_in=500, tokens_out=20, started_at=start + seq / 100,
                            duration_ms=5))
        else:
            out.append(Step(seq=seq, kind="tool", name="calculator", text="2",
                            input={"expression": "1+1"}, started_at=start + seq / 100,
                            duration_ms=1))
    return out


class Command(BaseCommand):
    help = "Measure what live OpenTelemetry export costs a run per step (no network)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--steps", type=int, default=2000)
        parser.add_argument("--messages", type=int, default=20)

    def handle(self, *args: Any, steps: int, messages: int, **options: Any) -> None:
        exporter = _Encoding()
        processor = BatchSpanProcessor(live.CountingExporter(exporter))
        records = _steps(steps, messages)
        saved = live.processor
        live.processor = lambda: processor  # type: ignore[assignment]
        try:
            sink = LiveSink(RunInfo(pk=0, agent_name="bench"), started_known=True)
            cpu, wall = time.thread_time(), time.perf_counter()

            async def feed() -> None:
                for step in records:
                    await sink.step(step)
                await sink.status("succeeded", {"answer": "x"})

            asyncio.run(feed())
            cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
            processor.force_flush()
        finally:
            live.processor = saved  # type: ignore[assignment]
            processor.shutdown()
        self.stdout.write(
            f"{steps} steps ({messages}-message LLM requests): run side "
            f"{wall / steps * 1000:.3f} ms wall, {cpu / steps * 1000:.3f} ms CPU per step; "
            f"exporter thread: {exporter.spans} spans, {exporter.bytes / 1e6:.1f} MB protobuf, "
            f"{exporter.seconds / exporter.spans * 1000:.3f} ms encoding per span")
