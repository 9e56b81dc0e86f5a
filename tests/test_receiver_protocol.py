"""OTLP/HTTP as the receiver speaks it (agentlab/receiver/protocol.py): which bodies it reads,
which it refuses and with what status, and replies that the real protobuf classes and the
OpenTelemetry SDK's own exporter read as the specification means them."""

from __future__ import annotations

import gzip
import json
import threading
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from google.protobuf import json_format
from google.rpc.status_pb2 import Status
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentlab.receiver.protocol import (
    ProtocolError,
    Reply,
    check_length,
    error_reply,
    read_body,
    reply,
    reply_encoding,
)

MIB = 1024 * 1024
LIMITS = {"max_bytes": 20 * MIB, "max_inflated": 64 * MIB}


def sample_request() -> ExportTraceServiceRequest:
    return json_format.ParseDict({"resourceSpans": [{"scopeSpans": [{"spans": [{
        "traceId": "W47/95gDgQPSabYzgT/GDA==", "spanId": "AAAAAAAAAAE=", "name": "agent run",
        "startTimeUnixNano": "1", "endTimeUnixNano": "2"}]}]}]}, ExportTraceServiceRequest())


def refused(headers: dict[str, str], body: bytes, **limits: int) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        read_body(headers, body, **{**LIMITS, **limits})
    return caught.value


def raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


COMPRESSIONS: dict[str | None, Callable[[bytes], bytes]] = {
    None: lambda data: data, "identity": lambda data: data, "gzip": gzip.compress,
    "GZIP": gzip.compress, "deflate": zlib.compress, "deflate (raw)": raw_deflate,
}


@pytest.mark.parametrize("content_type", ["application/x-protobuf", "application/json",
                                          "application/json; charset=utf-8",
                                          "Application/X-Protobuf"])
@pytest.mark.parametrize("compression", list(COMPRESSIONS))
def test_each_content_type_and_encoding_is_read(content_type, compression):
    encoding = "json" if "json" in content_type else "protobuf"
    message = sample_request()
    data = (json_format.MessageToJson(message).encode() if encoding == "json"
            else message.SerializeToString())
    headers = {"Content-Type": content_type}
    if compression:
        headers["content-encoding"] = compression.removesuffix(" (raw)")
    request = read_body(headers, COMPRESSIONS[compression](data), **LIMITS)
    assert (request.data, request.encoding) == (data, encoding)


def test_a_body_of_many_chunks_is_inflated_whole_up_to_exactly_the_limit():
    data = b"".join(f"span {i} of a long trace\n".encode() for i in range(200_000))  # ~5 MB
    headers = {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}
    packed = gzip.compress(data)
    assert read_body(headers, packed, max_bytes=len(packed), max_inflated=len(data)).data == data
    assert refused(headers, packed, max_inflated=len(data) - 1).status == 413
    assert refused(headers, packed, max_bytes=len(packed) - 1).status == 413


@pytest.mark.parametrize("content_type", ["text/plain", "", "application/grpc",
                                          "application/protobuf-but-not"])
def test_another_content_type_is_refused_with_415_naming_what_is_taken(content_type):
    error = refused({"Content-Type": content_type}, b"")
    assert error.status == 415
    assert "application/x-protobuf or application/json" in error.message
    assert repr(content_type) in error.message


@pytest.mark.parametrize("content_encoding", ["br", "zstd", "gzip, br"])
def test_another_content_encoding_is_refused_with_415(content_encoding):
    error = refused({"Content-Type": "application/json", "Content-Encoding": content_encoding},
                    b"{}")
    assert error.status == 415
    assert "gzip, deflate or none" in error.message


def test_a_body_over_the_limit_is_refused_with_413_also_before_it_is_read():
    headers = {"Content-Type": "application/x-protobuf", "Content-Length": str(MIB + 1)}
    with pytest.raises(ProtocolError) as caught:
        check_length(headers, max_bytes=MIB)
    assert caught.value.status == 413
    assert "1,048,576" in caught.value.message
    check_length({**headers, "Content-Length": str(MIB)}, max_bytes=MIB)
    check_length({"Content-Type": "application/x-protobuf"}, max_bytes=MIB)  # chunked: unknown
    assert refused(headers, b"x" * (MIB + 1), max_bytes=MIB).status == 413
    assert refused(headers, b"x" * (MIB + 1), max_inflated=MIB).status == 413


def zip_bomb(size: int, wbits: int) -> bytes:
    """`size` zero bytes compressed (about a thousandth of it), never held whole."""
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    zeros = bytes(MIB)
    return b"".join([*(packer.compress(zeros) for _ in range(size // MIB)), packer.flush()])


@pytest.mark.parametrize(("encoding", "wbits"), [("gzip", 16 + zlib.MAX_WBITS),
                                                 ("deflate", zlib.MAX_WBITS)])
def test_a_gzip_bomb_is_refused_with_413_without_inflating_it(encoding, wbits):
    bomb = zip_bomb(100 * MIB, wbits)
    assert len(bomb) < 200_000
    headers = {"Content-Type": "application/x-protobuf", "Content-Encoding": encoding}
    tracemalloc.start()
    try:
        error = refused(headers, bomb, max_inflated=4 * MIB)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert error.status == 413
    assert "4,194,304" in error.message
    assert peak < 8 * MIB, f"inflating the bomb held {peak:,} bytes at once"


@pytest.mark.parametrize(("name", "body", "encoding"), [
    ("not gzip at all", b"hello, world", "gzip"),
    ("corrupt in the middle", None, "gzip"),
    ("cut short", gzip.compress(b"x" * 100_000)[:-20], "gzip"),
    ("empty", b"", "gzip"),
    ("data after the stream", gzip.compress(b"{}") + b"trailing", "gzip"),
    ("corrupt deflate", zlib.compress(b"y" * 1000)[:5] + b"\xff" * 20, "deflate"),
])
def test_a_corrupt_compressed_body_is_refused_with_400(name, body, encoding):
    if body is None:
        whole = bytearray(gzip.compress(bytes(range(256)) * 400))
        whole[len(whole) // 2: len(whole) // 2 + 16] = b"\xff" * 16
        body = bytes(whole)
    error = refused({"Content-Type": "application/x-protobuf", "Content-Encoding": encoding}, body)
    assert error.status == 400, name
    assert encoding in error.message


def test_success_is_an_empty_export_response_in_the_requests_encoding():
    status, body, content_type, headers = reply("protobuf")
    assert (status, content_type, headers) == (200, "application/x-protobuf", {})
    assert not ExportTraceServiceResponse.FromString(body).HasField("partial_success")
    assert reply("json") == Reply(200, b"{}", "application/json", {})


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
def test_partial_success_says_how_many_spans_were_rejected_and_why(encoding):
    status, body, content_type, _ = reply(encoding, rejected=3, message="3 spans had no trace id")
    assert status == 200
    if encoding == "json":
        assert content_type == "application/json"
        assert json.loads(body) == {"partialSuccess": {"rejectedSpans": "3",
                                                       "errorMessage": "3 spans had no trace id"}}
        response = json_format.Parse(body, ExportTraceServiceResponse())
    else:
        response = ExportTraceServiceResponse.FromString(body)
    assert response.partial_success.rejected_spans == 3
    assert response.partial_success.error_message == "3 spans had no trace id"
    warning = reply(encoding, message="spans past 10,000 per run are dropped")
    assert "spans past" in warning.body.decode(errors="replace")


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
@pytest.mark.parametrize(("status", "code"), [(400, 3), (401, 16), (403, 7), (413, 3),
                                              (415, 3), (429, 8), (503, 14)])
def test_an_error_is_a_google_rpc_status_in_the_requests_encoding(encoding, status, code):
    message = "Unknown token — send Authorization: Bearer <token>."
    answer = error_reply(encoding, status, message)
    assert (answer.status, answer.headers) == (status, {})
    if encoding == "json":
        assert answer.content_type == "application/json"
        assert json.loads(answer.body) == {"code": code, "message": message}
        parsed = json_format.Parse(answer.body, Status())
    else:
        assert answer.content_type == "application/x-protobuf"
        parsed = Status.FromString(answer.body)
    assert (parsed.code, parsed.message) == (code, message)


def test_retry_after_is_whole_seconds_and_at_least_one():
    assert error_reply("protobuf", 429, "slow down", retry_after=2.1).headers == {
        "Retry-After": "3"}
    assert error_reply("json", 503, "busy", retry_after=0).headers == {"Retry-After": "1"}


def test_a_refusal_is_answered_in_the_requests_encoding_or_else_protobuf():
    assert reply_encoding({"content-type": "application/json; charset=utf-8"}) == "json"
    assert reply_encoding({"Content-Type": "application/x-protobuf"}) == "protobuf"
    assert reply_encoding({"Content-Type": "text/html"}) == "protobuf"
    assert reply_encoding({}) == "protobuf"


# -- The SDK's own exporter against a server that reads and answers with this module ----------

class ScriptedOTLPServer:
    """Loopback /v1/traces: each request read with `read_body`, answered with the next reply of
    the script (a refusal of `read_body` is answered with its status)."""

    def __init__(self, script: list[Callable[[], Reply]]) -> None:
        self.script = list(script)
        self.received: list[tuple[float, bytes | None, int]] = []  # (when, data, status)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                headers = dict(self.headers.items())
                body = self.rfile.read(int(headers.get("Content-Length") or 0))
                data = None
                try:
                    data = read_body(headers, body, **LIMITS).data
                    answer = server.script.pop(0)()
                except ProtocolError as exc:
                    answer = error_reply(reply_encoding(headers), exc.status, exc.message)
                server.received.append((time.monotonic(), data, answer.status))
                self.send_response(answer.status)
                for name, value in {"Content-Type": answer.content_type,
                                    "Content-Length": str(len(answer.body)),
                                    **answer.headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(answer.body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1/traces"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def spans() -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("agent").start_as_current_span("agent run"), \
            provider.get_tracer("agent").start_as_current_span("llm call"):
        pass
    provider.shutdown()
    return list(memory.get_finished_spans())


@pytest.fixture
def serve() -> Iterator[Callable[..., ScriptedOTLPServer]]:
    servers: list[ScriptedOTLPServer] = []

    def start(*script: Callable[[], Reply]) -> ScriptedOTLPServer:
        servers.append(ScriptedOTLPServer(list(script)))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def export(server: ScriptedOTLPServer, spans: list[ReadableSpan],
           compression: Compression = Compression.Gzip) -> SpanExportResult:
    exporter = OTLPSpanExporter(endpoint=server.endpoint, compression=compression, timeout=10)
    try:
        return exporter.export(spans)
    finally:
        exporter.shutdown()


@pytest.mark.parametrize("compression", [Compression.Gzip, Compression.Deflate,
                                         Compression.NoCompression])
def test_the_sdk_exporter_gets_through_and_its_spans_are_read(serve, spans, compression):
    server = serve(lambda: reply("protobuf"))
    assert export(server, spans, compression) is SpanExportResult.SUCCESS
    [(_, data, status)] = server.received
    sent = ExportTraceServiceRequest.FromString(data)
    names = [s.name for rs in sent.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert (status, sorted(names)) == (200, ["agent run", "llm call"])


def test_the_sdk_exporter_takes_a_partial_success_as_done_and_does_not_resend(serve, spans):
    server = serve(lambda: reply("protobuf", rejected=1, message="1 span over the run's limit"))
    assert export(server, spans) is SpanExportResult.SUCCESS
    assert len(server.received) == 1


@pytest.mark.parametrize("status", [400, 401, 403, 413, 415])
def test_the_sdk_exporter_does_not_resend_after_a_final_error(serve, spans, status):
    server = serve(lambda: error_reply("protobuf", status, "no"), lambda: reply("protobuf"))
    assert export(server, spans) is SpanExportResult.FAILURE
    assert [s for _, _, s in server.received] == [status]


@pytest.mark.parametrize(("status", "retry_after"), [(429, 2), (503, 1)])
def test_the_sdk_exporter_waits_what_retry_after_says_then_resends(serve, spans, status,
                                                                  retry_after):
    # 2 s is longer than the SDK's own first backoff (1 s ± 20 %): that wait is Retry-After's.
    server = serve(lambda: error_reply("protobuf", status, "busy", retry_after=retry_after),
                   lambda: reply("protobuf"))
    assert export(server, spans) is SpanExportResult.SUCCESS
    (first, _, refused_status), (second, data, ok) = server.received
    assert (refused_status, ok) == (status, 200)
    assert second - first >= retry_after - 0.1
    assert ExportTraceServiceRequest.FromString(data).resource_spans
