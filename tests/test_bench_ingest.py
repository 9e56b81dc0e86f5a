"""manage.py bench_ingest at tiny sizes (real processes: daphne with the receiver, the
WebSocket watcher, Phoenix in its virtualenv where scripts/test made it), and its payload:
what the OpenTelemetry SDK's exporter sends, read as the runs an agent made."""

from __future__ import annotations

import contextlib
import json
import random
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace.export import SpanExportResult

from agentlab.bench.ingest import PHOENIX_VERSION, phoenix_python, send_all
from agentlab.bench.otlp_payload import (
    agent_trace,
    agent_traces,
    bodies,
    export_order,
    start_key,
)
from traces.otel.decode import traces
from traces.otel.steps import run_from_trace

TINY = ("--spans", "50", "--traces", "5", "--buffered", "30", "--latency-spans", "60",
        "--timeout", "60")


def _row(out: str, start: str) -> list[str]:
    line = next(line for line in out.splitlines() if line.startswith(start))
    return [cell.strip() for cell in re.split(r"\s{2,}", line.strip())]


def test_a_tiny_bench_prints_each_figure_beside_its_goal(tmp_path, capsys):
    figures_file = tmp_path / "ingest.json"
    call_command("bench_ingest", *TINY, "--skip-phoenix", "--json", str(figures_file))
    out = capsys.readouterr().out
    anchor = re.escape(f"Phoenix {PHOENIX_VERSION}")
    assert re.search(rf"^figure\s+goal\s+Agent Lab\s+{anchor}$", out, re.M), out
    one = _row(out, "spans/s until queryable: 1 trace × 50 spans")
    assert one[1] == "≥ 5,000" and re.fullmatch(r"[\d,]+ \([\d.]+ s\)", one[2]), one
    assert one[3] == "skipped"
    many = _row(out, "spans/s until queryable: 5 traces × 10 spans")
    assert re.fullmatch(r"[\d,]+ \([\d.]+ s\)", many[2]), many
    live = _row(out, "p95 request → browser at 1,000 spans/s")
    assert live[1] == "< 100 ms" and re.fullmatch(r"[\d.]+ ms", live[2]), live
    memory = _row(out, "memory per 1,000 spans buffered (2nd open trace of 30)")
    assert re.fullmatch(r"-?[\d.]+ MiB \(1st: -?[\d.]+\)", memory[2]), memory
    assert "goal ≥ 5,000 spans/s (1 trace × 50): " in out
    assert "goal p95 < 100 ms at 1,000 spans/s: " in out

    lab = json.loads(figures_file.read_text())["agentlab"]
    for key, spans in (("one", 50), ("many", 50)):
        assert lab[key]["spans"] == spans and lab[key]["seconds"] is not None
        assert lab[key]["sent"]["dropped"] == lab[key]["sent"]["rejected"] == 0
    # Every span the browser watched for came to it: by its step's frame, or with the run's
    # end (the request holding the root span).
    latency = lab["latency"]
    assert latency["spans"] == 58  # 60 less the one that opened the run, less the root
    assert latency["seen"] == latency["spans"] and len(latency["arrival_ms"]) == 58
    assert latency["final_ms"] is not None and all(ms >= 0 for ms in latency["arrival_ms"])
    assert [b["spans"] for b in lab["buffered"]] == [30, 30]
    assert all(b["held"] and b["rss_after_kb"] > 0 for b in lab["buffered"])


def test_beside_phoenix_every_figure_has_its_anchor(tmp_path, capsys):
    if not phoenix_python().exists():
        pytest.skip(f"no Phoenix virtualenv at {phoenix_python().parent.parent} "
                    "(scripts/test makes it)")
    figures_file = tmp_path / "ingest.json"
    call_command("bench_ingest", *TINY, "--phoenix-timeout", "120", "--json",
                 str(figures_file))
    out = capsys.readouterr().out
    assert re.fullmatch(r"[\d,]+ \([\d.]+ s\)",
                        _row(out, "spans/s until queryable: 1 trace × 50")[3])
    assert _row(out, "p95 request → browser")[3] == "no live view"
    assert re.fullmatch(r"-?[\d.]+ MiB \(1st: -?[\d.]+\)",
                        _row(out, "memory per 1,000 spans buffered")[3])
    assert out.count("Phoenix's REST API returns 50 of them") == 2
    phoenix = json.loads(figures_file.read_text())["phoenix"]
    assert phoenix["one"]["spans_per_s"] > 0 and phoenix["many"]["spans_per_s"] > 0


def test_bad_sizes_are_refused_before_anything_starts():
    with pytest.raises(CommandError, match="numbers ≥ 1"):
        call_command("bench_ingest", "--spans", "0", "--skip-phoenix")
    with pytest.raises(CommandError, match="at least 2"):
        call_command("bench_ingest", "--trace-spans", "1", "--skip-phoenix")
    with pytest.raises(CommandError, match="no Phoenix at"):
        call_command("bench_ingest", "--phoenix-python", "/nonexistent/python")


@contextlib.contextmanager
def collector(answers: list[tuple[int, dict[str, str], bytes]]) -> Iterator[tuple[str, list]]:
    """A loopback OTLP endpoint that keeps every body it gets and answers from `answers` in
    turn (then 200 with an empty body); yields its URL and the bodies."""
    got: list[bytes] = []

    class Keep(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            got.append(self.rfile.read(int(self.headers["Content-Length"])))
            assert self.headers["Content-Type"] == "application/x-protobuf"
            status, headers, body = answers.pop(0) if answers else (200, {}, b"")
            self.send_response(status)
            for name, value in {**headers, "Content-Length": str(len(body))}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Keep)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", got
    finally:
        server.shutdown()


def test_the_requests_are_those_the_sdk_exporter_sends():
    """The real OTLPSpanExporter, in the BatchSpanProcessor's batches: the bench's bodies are
    the same bytes."""
    spans = export_order([agent_trace(random.Random(3), "p", 700)])
    with collector([]) as (url, got):
        exporter = OTLPSpanExporter(endpoint=url)
        for i in range(0, len(spans), 512):
            assert exporter.export(spans[i:i + 512]) == SpanExportResult.SUCCESS
    assert got == [body for _n, body in bodies(spans)]
    assert [n for n, _body in bodies(spans)] == [512, 188]


def test_the_sender_waits_out_a_429_and_counts_a_partial_success():
    partial = ExportTraceServiceResponse()
    partial.partial_success.rejected_spans = 3
    partial.partial_success.error_message = "1,000 traces are open"
    answers = [(429, {"Retry-After": "0"}, b""), (200, {}, partial.SerializeToString()),
               (200, {}, b""), (400, {}, b"not OTLP")]
    with collector(answers) as (url, got):
        sent = send_all(url, {"Authorization": "Bearer t"}, [(5, b"a"), (4, b"b")])
        refused = send_all(url, {}, [(1, b"c")])
    assert got == [b"a", b"a", b"b", b"c"]  # the first again after its 429, not the 400
    assert (sent.requests, sent.spans, sent.retries, sent.dropped, sent.rejected) == (
        2, 9, 1, 0, 3)
    assert sent.first_error == "200, partial success: 1,000 traces are open"
    assert (refused.dropped, refused.first_error) == (1, "400: not OTLP")


def test_an_agent_trace_reads_as_a_run_of_llm_calls_and_tools():
    trace = agent_trace(random.Random(4), "bench", 10, number=7)
    spans = export_order([trace])
    assert spans[-1].parent is None and spans[-1].attributes["openinference.span.kind"] == "AGENT"
    ended: set[int] = set()
    for span in spans:  # as an SDK exports them: a span once all its children have ended
        ended.add(span.context.span_id)
        assert span.parent is None or span.parent.span_id not in ended
    assert len({start_key(s.start_time / 1e9) for s in spans}) == 10  # a span per start

    (decoded,) = traces(b"".join(body for _n, body in bodies(spans))).values()
    run, steps = run_from_trace(decoded)
    assert run["status"] == "succeeded" and "project 7" in run["input"]
    assert run["final_answer"] and run["agent_snapshot"]["imported_from"]["trace_id"] == \
        trace.hex_id
    assert [s.kind for s in steps] == ["thought", "llm", "tool"] * 3
    llm = steps[1]
    assert llm.name.startswith("gpt-4o-mini") and llm.tokens_in > 0 and llm.tokens_out > 0
    assert [m["role"] for m in llm.input["messages"]] == ["system", "user"]
    assert llm.output["tool_calls"][0]["name"] == "search_docs"
    later = steps[4]  # the second call carries the first tool's exchange
    assert [m["role"] for m in later.input["messages"]] == ["system", "user", "assistant", "tool"]
    assert "Settings → Keys" in steps[2].text


def test_small_traces_run_one_after_another_and_an_open_trace_has_no_root():
    many = agent_traces(random.Random(5), "bench", 4, 10)
    assert len({t.trace_id for t in many}) == 4
    ends = [max(s.end_time for s in t.spans) for t in many]
    starts = [min(s.start_time for s in t.spans) for t in many]
    assert all(starts[i + 1] > ends[i] for i in range(3))
    open_trace = agent_trace(random.Random(6), "bench", 31, root=False)
    assert len(open_trace.spans) == 31 and not open_trace.root
    assert all(s.parent is not None for s in open_trace.spans)


def test_a_receiver_past_its_cap_shows_the_cap_and_the_most_it_can_have_done():
    from agentlab.management.commands.bench_ingest import _rate

    assert _rate({"spans": 10_000, "spans_per_s": None, "cap_s": 300.0, "seconds": None}) == \
        "> 300 s, under 33"
    assert _rate({"spans": 10_000, "spans_per_s": 7352.9, "cap_s": 300.0, "seconds": 1.36}) == \
        "7,353 (1.36 s)"


@pytest.mark.django_db(transaction=True)
def test_the_profile_prints_cpu_per_span_of_both_payloads_a_page_watching(capsys):
    call_command("bench_ingest", "--profile", "--spans", "40", "--traces", "3", "--batch", "16")
    out = capsys.readouterr().out
    one = re.search(r"^1 trace × 40 spans \(watched\): (\d+) µs CPU per span \([\d.]+ s CPU, "
                    r"[\d.]+ s wall, (\d+) step frames to a watcher\)$", out, re.M)
    assert one and int(one[1]) > 0, out
    assert int(one[2]) >= 40 - 16, out  # the steps after the first request's, live
    assert re.search(r"^3 traces × 10 spans: \d+ µs CPU per span", out, re.M), out
