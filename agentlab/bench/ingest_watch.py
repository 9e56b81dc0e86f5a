"""The browser and the instrumented agent of `manage.py bench_ingest`'s latency figure, in one
process of their own (python -m agentlab.bench.ingest_watch SPEC_JSON), free of Django (as
agentlab/bench/watch.py, for the same reasons).

One trace's first span opens the run; a WebSocket then watches it (/ws/runs/<id>/, the
bench user's session cookie) while the rest follow at a steady `rate` spans/s, in the batches a
BatchSpanProcessor would send: a request as soon as `batch` spans have ended, each sent from a
thread so the socket's clock is never held up. A span's latency: its step's first frame here
minus the start of the request that carried it (a step's `started_at` names its span,
agentlab/bench/otlp_payload.py); for the spans of the request that ends the run (the one with
the root span, after which the run is read whole), the run's final frame. Where a frame
carries the receiver's `recorded_at` (the request's spans reached the store), the time from
there is kept apart. Prints one JSON line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import sqlite3
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import requests

from agentlab.bench.ingest import PROTOBUF, post
from agentlab.bench.otlp_payload import agent_trace, batches, encode, export_order, start_key


@dataclass
class Latency:
    spans: int  # measured: every span after the first (which opened the run)
    seen: int  # of them, in the browser: by their step's frame, or the run's final frame
    at_final: int = 0  # of those, by the final frame (the request that ended the run)
    arrival_ms: list[float] = field(default_factory=list)  # request start → frame, every span
    step_ms: list[float] = field(default_factory=list)  # of those, by the span's own step frame
    recorded_ms: list[float] = field(default_factory=list)  # recorder's stamp → frame
    final_ms: float | None = None  # the root's request start → the run's final frame
    rate: float = 0.0  # spans/s actually sent
    requests: int = 0
    retries: int = 0
    dropped: int = 0
    first_error: str = ""


class Watcher:
    def __init__(self, keys: set[int]) -> None:
        self.posted: dict[int, float] = {}  # span start key -> its request's start
        self.keys = keys
        self.first: dict[int, tuple[float, Any]] = {}  # key -> (arrival, recorded_at)
        self.final_at: float | None = None
        self.loop = asyncio.get_running_loop()
        self.synced = self.loop.create_future()
        self.done = self.loop.create_future()
        self.errors: list[str] = []

    def on_frame(self, frame: dict[str, Any], arrived: float) -> None:
        kind = frame.get("type")
        # A placeholder step (a parent whose children came first) starts with its first
        # child and is "running": only a span's own step counts.
        if kind == "step" and frame.get("status") != "running":
            started = (frame.get("step") or {}).get("started_at")
            if isinstance(started, int | float):
                key = start_key(started)
                if key in self.keys and key not in self.first:
                    self.first[key] = (arrived, frame.get("recorded_at"))
        elif kind == "synced" and not self.synced.done():
            self.synced.set_result(True)
        elif kind == "final":
            self.final_at = arrived
        elif kind == "error":
            self.errors.append(str(frame.get("error")))
        if self.final_at is not None and not self.done.done():
            self.done.set_result(True)


def _socket_class() -> type:
    from autobahn.asyncio.websocket import WebSocketClientProtocol

    class Socket(WebSocketClientProtocol):
        def onOpen(self) -> None:  # noqa: N802 (autobahn's names)
            self.sendMessage(json.dumps({"action": "sync", "last_seq": 0}).encode())

        def onMessage(self, payload: bytes, is_binary: bool) -> None:  # noqa: N802
            arrived = time.time()
            self.factory.watcher.on_frame(json.loads(payload), arrived)

        def onClose(self, was_clean: bool, code: int | None, reason: str | None) -> None:  # noqa: N802
            w = self.factory.watcher
            if not w.done.done():
                w.done.set_exception(ConnectionError(f"socket closed: {code} {reason or ''}"))

    return Socket


def _run_id(database: str, trace_id: str, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30) as db:
                row = db.execute("SELECT run_id FROM receiver_receivedtrace WHERE trace_id = ?",
                                 (trace_id,)).fetchone()
            if row:
                return int(row[0])
        except sqlite3.OperationalError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"no run for trace {trace_id} after {timeout:g} s")
        time.sleep(0.05)


async def measure(spec: dict[str, Any]) -> Latency:
    from autobahn.asyncio.websocket import WebSocketClientFactory

    port, rate, size = spec["port"], float(spec["rate"]), int(spec["batch"])
    trace = agent_trace(random.Random(), spec["project"], int(spec["spans"]), number=1)
    ordered = export_order([trace])
    opener, rest = ordered[0], ordered[1:]
    url = f"http://127.0.0.1:{port}/v1/traces"
    headers = {**PROTOBUF, "Authorization": f"Bearer {spec['token']}"}
    with requests.Session() as session:
        opened = post(session, url, headers, encode([opener]), 1)
    if opened.dropped:
        raise RuntimeError(f"the first span was refused: {opened.first_error}")
    run_id = await asyncio.to_thread(_run_id, spec["database"], trace.hex_id, 30)

    keys = {start_key(s.start_time / 1e9) for s in rest if s.parent is not None}
    watcher = Watcher(keys)
    factory = WebSocketClientFactory(f"ws://127.0.0.1:{port}/ws/runs/{run_id}/",
                                     origin=f"http://127.0.0.1:{port}",
                                     headers={"Cookie": spec["cookie"]})
    factory.protocol = _socket_class()
    factory.watcher = watcher
    _transport, proto = await watcher.loop.create_connection(factory, "127.0.0.1", port)
    await asyncio.wait_for(watcher.synced, 30)

    result = Latency(spans=len(keys), seen=0)
    lock = threading.Lock()

    def send(chunk: list[Any], body: bytes) -> None:
        with requests.Session() as own:  # one per thread: two requests may overlap
            sent = post(own, url, headers, body, len(chunk))
        with lock:
            for span in chunk:
                watcher.posted[start_key(span.start_time / 1e9)] = sent.starts[0]
            result.requests += 1
            result.retries += sent.retries
            result.dropped += sent.dropped
            result.first_error = result.first_error or sent.first_error

    # Encoded before the clock starts: the agent's own CPU is not the receiver's latency.
    chunks = [(chunk, encode(chunk)) for chunk in batches(rest, size)]
    began, done_spans, threads = time.monotonic(), 0, []
    for chunk, body in chunks:
        done_spans += len(chunk)
        # The batch leaves once its last span has ended, at `rate` spans/s.
        await asyncio.sleep(max(0.0, began + done_spans / rate - time.monotonic()))
        # The request's start is stamped inside `post`, as the thread sends it.
        thread = threading.Thread(target=send, args=(chunk, body), daemon=True)
        thread.start()
        threads.append(thread)
    sent_s = time.monotonic() - began
    with contextlib.suppress(TimeoutError, ConnectionError):
        await asyncio.wait_for(asyncio.shield(watcher.done), float(spec["timeout"]))
    for thread in threads:  # every request answered: everything it stored is published
        await asyncio.to_thread(thread.join, 30)
    await asyncio.sleep(0.2)  # frames still on their way
    proto.sendClose()

    root_key = start_key(ordered[-1].start_time / 1e9)
    result.rate = len(rest) / sent_s if sent_s else 0.0
    for key, (arrived, recorded) in watcher.first.items():
        if key in watcher.posted:
            result.step_ms.append((arrived - watcher.posted[key]) * 1000)
        if isinstance(recorded, int | float):
            result.recorded_ms.append((arrived - recorded) * 1000)
    if watcher.final_at is not None:
        # The request that brings the root span ends the run: the run is read whole and its
        # final frame, not one frame per step, tells the browser (which then shows them all).
        late = [k for k in keys - watcher.first.keys() if k in watcher.posted]
        result.arrival_ms += [(watcher.final_at - watcher.posted[k]) * 1000 for k in late]
        result.at_final = len(late)
        if root_key in watcher.posted:
            result.final_ms = (watcher.final_at - watcher.posted[root_key]) * 1000
    result.arrival_ms += result.step_ms
    result.seen = len(watcher.first) + result.at_final
    if watcher.errors and not result.first_error:
        result.first_error = watcher.errors[0]
    return result


def main(spec: dict[str, Any]) -> None:
    print(json.dumps(asdict(asyncio.run(measure(spec)))))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
