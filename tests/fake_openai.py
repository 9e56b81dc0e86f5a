"""A scripted OpenAI-compatible HTTP server on loopback, for deterministic tests.

It speaks the real wire format (JSON and SSE streaming) so the openai SDK, our client and the
paradigms are exercised end to end; only the model's words are scripted. Use it where a test needs
a specific reply (a tool call, a malformed argument string, a 429); use the embedded model where a
test needs a real model.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    text: str = ""
    tool_calls: list[tuple[str, str]] = field(default_factory=list)  # (name, raw JSON args)
    usage: tuple[int, int] = (10, 5)
    finish_reason: str | None = None
    model: str = "scripted-model"


@dataclass
class Fail:
    status: int
    message: str = ""
    code: str | None = None


@dataclass
class Delay:
    seconds: float
    then: Reply | Fail


Scripted = Reply | Fail | Delay


class FakeOpenAI:
    """`with FakeOpenAI() as server: server.script(Reply("hi")); ... server.requests`."""

    def __init__(self) -> None:
        self.queue: list[Scripted] = []
        self.responder: Callable[[dict[str, Any]], Scripted] | None = None
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def script(self, *items: Scripted) -> FakeOpenAI:
        with self.lock:
            self.queue.extend(items)
        return self

    def reset(self) -> None:
        with self.lock:
            self.queue.clear()
            self.requests.clear()
            self.responder = None

    def next_reply(self, body: dict[str, Any]) -> Scripted:
        with self.lock:
            self.requests.append(body)
            if self.queue:
                return self.queue.pop(0)
        if self.responder is not None:
            return self.responder(body)
        return Fail(500, "fake server: script exhausted (no scripted reply left)")

    def start(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _tool_calls(reply: Reply) -> list[dict[str, Any]]:
    return [
        {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
        for i, (n, a) in enumerate(reply.tool_calls)
    ]


def completion(reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = _tool_calls(reply)
    finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:8]}", "object": "chat.completion",
        "created": int(time.time()), "model": reply.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": reply.usage[0], "completion_tokens": reply.usage[1],
                  "total_tokens": sum(reply.usage)},
    }


def chunks(reply: Reply) -> list[dict[str, Any]]:
    """The same reply as stream chunks: text in small pieces, tool-call arguments split too."""
    base = {"id": "chatcmpl-stream", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": reply.model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": ""})]
    text = reply.text
    out += [chunk({"content": text[i:i + 4]}) for i in range(0, len(text), 4)]
    for i, (name, args) in enumerate(reply.tool_calls):
        out.append(chunk({"tool_calls": [{"index": i, "id": f"call_{i}", "type": "function",
                                          "function": {"name": name, "arguments": ""}}]}))
        half = len(args) // 2
        for piece in (args[:half], args[half:]):
            out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
    out.append(chunk({}, reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")))
    out.append({**base, "choices": [], "usage": {
        "prompt_tokens": reply.usage[0], "completion_tokens": reply.usage[1],
        "total_tokens": sum(reply.usage)}})
    return out


def _handler(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            if self.path.rstrip("/").endswith("/models"):
                self._json(200, {"object": "list", "data": [
                    {"id": "scripted-model", "object": "model", "owned_by": "tests"}]})
            else:
                self._json(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            body["_authorization"] = self.headers.get("Authorization", "")
            item = server.next_reply(body)
            if isinstance(item, Delay):
                time.sleep(item.seconds)
                item = item.then
            if isinstance(item, Fail):
                self._json(item.status, {"error": {
                    "message": item.message or f"scripted failure {item.status}",
                    "type": "scripted", "code": item.code}})
                return
            if not body.get("stream"):
                self._json(200, completion(item))
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for piece in chunks(item):
                self.wfile.write(f"data: {json.dumps(piece)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    return Handler
