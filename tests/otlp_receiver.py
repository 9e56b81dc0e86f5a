"""A real OTLP/HTTP trace receiver on loopback (protobuf POSTs to /v1/traces), for the live
export tests: it keeps every span and the headers it came with, and can be told to fail."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


class OTLPReceiver:
    def __init__(self, *, status: int = 200) -> None:
        self.status = status
        self.spans: list[Any] = []  # opentelemetry.proto.trace.v1.Span, in arrival order
        self.requests: list[ExportTraceServiceRequest] = []  # each export whole, as sent
        self.resources: list[dict[str, str]] = []
        self.headers: list[dict[str, str]] = []
        self.arrivals: list[float] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver.lock:
                    receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                    if receiver.status == 200 and self.path == "/v1/traces":
                        message = ExportTraceServiceRequest.FromString(body)
                        receiver.requests.append(message)
                        for rs in message.resource_spans:
                            res = {a.key: a.value.string_value for a in rs.resource.attributes}
                            for ss in rs.scope_spans:
                                receiver.spans.extend(ss.spans)
                                receiver.resources.extend(res for _ in ss.spans)
                        receiver.arrivals.append(time.time())
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(receiver.status if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> OTLPReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
