"""A scripted OpenAI-compatible HTTP server on loopback, for deterministic tests.

It speaks the real wire format (JSON and SSE streaming) so the openai SDK, our client and the
paradigms are exercised end to end; only the model's words are scripted. Use it where a test needs
a specific reply (a tool call, a malformed argument string, a 429); use the embedded model where a
test needs a real model.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One completion. Streamed, text goes out 4 characters a chunk and each tool call's
    arguments in two halves; `chunk_delay_s` paces the chunks (slow-model and TTFT tests)."""

    text: str = ""
    tool_calls: list[tuple[str, str]] = field(default_factory=list)  # (name, raw JSON args)
    usage: tuple[int, int] = (10, 5)  # (prompt_tokens, completion_tokens)
    finish_reason: str | None = None  # default: "tool_calls" if there are any, else "stop"
    model: str = "scripted-model"
    chunk_delay_s: float = 0.0
    repeat_tool_names: bool = False  # llama.cpp style: the name in every tool-call delta


@dataclass
class Fail:
    """An OpenAI-shaped error: {"error": {"message", "type", "code"}} with this HTTP status."""

    status: int
    message: str = ""
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)  # e.g. {"Retry-After": "1"}

    @classmethod
    def context_too_long(cls, limit: int = 4096) -> Fail:
        return cls(400, f"This model's maximum context length is {limit} tokens. However, your "
                        "messages resulted in more tokens.", "context_length_exceeded")

    @classmethod
    def unknown_model(cls, model: str = "nope") -> Fail:
        return cls(404, f"The model `{model}` does not exist or you do not have access to it.",
                   "model_not_found")

    @classmethod
    def bad_key(cls) -> Fail:
        return cls(401, "Incorrect API key provided.", "invalid_api_key")


@dataclass
class Delay:
    """Wait before answering (a slow endpoint, or one past the client's timeout)."""

    seconds: float
    then: Reply | Fail


@dataclass
class Drop:
    """Close the connection without an answer (a crashed or restarting server)."""


@dataclass
class BrokenStream:
    """Open the SSE stream, send the first `after` chunks of `reply`, then hang up without
    [DONE]. `BrokenStream()` is what llama.cpp's server does for a streamed "auto" tool call."""

    reply: Reply = field(default_factory=lambda: Reply(text="never finished"))
    after: int = 0


Scripted = Reply | Fail | Delay | Drop | BrokenStream
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                403: "permission_error", 404: "not_found_error", 429: "rate_limit_error"}


class AtOnce:
    """A responder that takes `seconds` to answer `answer(body)` and counts how many requests it
    holds at the same time (`most`): what a concurrency limit is checked against."""

    def __init__(self, answer: Callable[[dict[str, Any]], str], seconds: float) -> None:
        self.answer, self.seconds = answer, seconds
        self.now = self.most = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> str:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(self.seconds)
        with self._lock:
            self.now -= 1
        return self.answer(body)


class FakeOpenAI:
    """`with FakeOpenAI() as server: server.script(Reply("hi"), Fail(429)); ...`.

    Scripted items answer in order; when none is left, `responder(body)` answers (it may return
    a plain string: a text reply); with neither, a 400 (not retried) says the script is
    exhausted.
    `requests` holds every JSON body received, `headers` the matching request headers
    (lower-case names).
    """

    def __init__(self) -> None:
        self.queue: list[Scripted | str] = []
        self.responder: Callable[[dict[str, Any]], Scripted | str] | None = None
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.peers: list[int] = []  # the client's port per request: one per connection
        self.omit_stream_usage = False  # like llama.cpp's server, which sends no usage chunk
        self.lock = threading.Lock()
        self.httpd = _QuietServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    @property
    def last_request(self) -> dict[str, Any]:
        assert self.requests, "the fake server has received no request"
        return self.requests[-1]

    def script(self, *items: Scripted | str) -> FakeOpenAI:
        with self.lock:
            self.queue.extend(items)
        return self

    def reset(self) -> None:
        with self.lock:
            self.queue.clear()
            self.requests.clear()
            self.headers.clear()
            self.peers.clear()
            self.responder = None
            self.omit_stream_usage = False

    def next_reply(self, body: dict[str, Any], headers: dict[str, str]) -> Scripted:
        with self.lock:
            self.requests.append(body)
            self.headers.append(headers)
            item = self.queue.pop(0) if self.queue else None
        if item is None and self.responder is not None:
            item = self.responder(body)
        if item is None:
            return Fail(400, f"fake server: script exhausted — request #{len(self.requests)} "
                             "has no scripted reply (script more items or set .responder)")
        return Reply(text=item) if isinstance(item, str) else item

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


class RawServer:
    """An HTTP server on loopback that answers every POST with the same raw body."""

    def __init__(self, body: bytes, content_type: str = "application/json") -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out and hung up is what timeout tests do; don't print it.
        if not isinstance(sys.exception(), ConnectionError):
            super().handle_error(request, client_address)


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


def chunks(reply: Reply, include_usage: bool = True) -> list[dict[str, Any]]:
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
            fn = {"arguments": piece, **({"name": name} if reply.repeat_tool_names else {})}
            out.append(chunk({"tool_calls": [{"index": i, "function": fn}]}))
    out.append(chunk({}, reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")))
    if include_usage:  # as OpenAI: only with stream_options={"include_usage": true}
        out.append({**base, "choices": [], "usage": {
            "prompt_tokens": reply.usage[0], "completion_tokens": reply.usage[1],
            "total_tokens": sum(reply.usage)}})
    return out


def _handler(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _json(self, status: int, payload: dict[str, Any],
                  headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
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
            server.peers.append(self.client_address[1])
            if self.path.rstrip("/").endswith("/embeddings"):  # not scripted: one vector each
                server.requests.append(body)
                inputs = body.get("input")
                texts = inputs if isinstance(inputs, list) else [inputs]
                self._json(200, {"object": "list", "model": body.get("model"), "data": [
                    {"object": "embedding", "index": i,
                     "embedding": [float(len(str(t))), 0.5, -0.5]}
                    for i, t in enumerate(texts)],
                    "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)}})
                return
            item = server.next_reply(body, {k.lower(): v for k, v in self.headers.items()})
            if isinstance(item, Delay):
                time.sleep(item.seconds)
                item = item.then
            if isinstance(item, Drop):
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if isinstance(item, Fail):
                self._json(item.status, {"error": {
                    "message": item.message or f"scripted failure {item.status}",
                    "type": _ERROR_TYPES.get(item.status, "server_error"), "code": item.code}},
                    item.headers)
                return
            broken = item if isinstance(item, BrokenStream) else None
            reply = broken.reply if broken else item
            if not body.get("stream") and not broken:
                self._json(200, completion(reply))
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            wants_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            pieces = chunks(reply, wants_usage and not server.omit_stream_usage)
            for piece in pieces[:broken.after] if broken else pieces:
                if reply.chunk_delay_s:
                    time.sleep(reply.chunk_delay_s)
                self.wfile.write(f"data: {json.dumps(piece)}\n\n".encode())
                self.wfile.flush()
            if not broken:
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            self.close_connection = True

    return Handler
