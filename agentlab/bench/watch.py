"""The browsers of `manage.py bench_live`: one WebSocket per run, a clock on every step frame.

Latency of a step frame = its arrival here minus the moment the runtime handed the step to the
recorder (`recorded_at`): it counts the row's write, the publish through the channel layer and
the render. `sent_at` (stamped once the row is written) splits that in two. A frame with
neither (an older server) falls back to the step's own end (started_at + duration_ms). All are
time.time() on the same machine.

It runs as its own process (python -m agentlab.bench.watch SPEC_JSON), free of Django: daphne
pins txaio to Twisted in a Django process, and the clocks should not share a GIL with the
server either. autobahn is imported there only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any

CLOCK_RECORDED = "recorded_at (handed to the recorder → arrival)"
CLOCK_SENT = "sent_at (committed → arrival)"
CLOCK_END = "step end (upper bound: includes the step's DB write)"


def latency_ms(frame: dict[str, Any], arrived: float) -> tuple[float, str]:
    """How long a step frame took to arrive, and by which clock."""
    if isinstance(frame.get("recorded_at"), int | float):
        return (arrived - frame["recorded_at"]) * 1000, CLOCK_RECORDED
    if isinstance(frame.get("sent_at"), int | float):
        return (arrived - frame["sent_at"]) * 1000, CLOCK_SENT
    step = frame.get("step") or {}
    end = step.get("started_at", arrived) + (step.get("duration_ms") or 0) / 1000
    return (arrived - end) * 1000, CLOCK_END


# Where a step frame's time went, from the stamps it carries (agentlab.live.consumers.CLOCKS).
COMMITTED = "committed → browser"
STAGES = (("row written", "recorded_at", "sent_at"),
          ("worker queue", "sent_at", "out_at"),  # committed → leaving for Redis
          ("Redis → web", "out_at", "heard_at"),  # the layer, and the web process's receive
          ("web → browser", "heard_at", None),  # render, socket, this process's read
          (COMMITTED, "sent_at", None))


def stage_ms(frame: dict[str, Any], arrived: float) -> dict[str, float]:
    out = {}
    for name, start, end in STAGES:
        a, b = frame.get(start), arrived if end is None else frame.get(end)
        if isinstance(a, int | float) and isinstance(b, int | float):
            out[name] = (b - a) * 1000
    return out


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


@dataclass
class Probe:
    """What one socket saw of one run."""

    run_id: int
    latencies_ms: list[float] = field(default_factory=list)
    clock: str = ""
    totals: dict[str, Any] = field(default_factory=dict)
    status: str = ""
    finished_at: float = 0.0
    synced: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop()
                                   .create_future())
    done: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop()
                                 .create_future())
    errors: list[str] = field(default_factory=list)
    stages: dict[str, list[float]] = field(default_factory=dict)  # stage -> ms per frame

    def on_frame(self, frame: dict[str, Any], arrived: float) -> None:
        kind = frame.get("type")
        if kind == "step" and self.synced.done():
            ms, self.clock = latency_ms(frame, arrived)
            self.latencies_ms.append(ms)
            for stage, ms in stage_ms(frame, arrived).items():
                self.stages.setdefault(stage, []).append(ms)
        elif kind == "synced" and not self.synced.done():
            self.synced.set_result(True)
        elif kind == "final" and not self.done.done():
            self.status, self.totals, self.finished_at = frame["status"], frame["totals"], arrived
            if frame.get("error"):
                self.errors.append(str(frame["error"]))
            self.done.set_result(True)
        elif kind == "error":
            self.errors.append(str(frame.get("error")))
            if '"start"' in str(frame.get("frame")) and not self.done.done():
                # The run was refused (a limit): it never starts, so no final comes.
                self.status, self.finished_at = "refused", arrived
                self.done.set_result(True)

    def lost(self, reason: str) -> None:
        for fut in (self.synced, self.done):
            if not fut.done():
                fut.set_exception(ConnectionError(f"run {self.run_id}: socket closed: {reason}"))


def _socket_class() -> type:
    from autobahn.asyncio.websocket import WebSocketClientProtocol

    class Socket(WebSocketClientProtocol):
        def onOpen(self) -> None:  # noqa: N802 (autobahn's names)
            self.send_json({"action": "sync", "last_seq": 0})

        def onMessage(self, payload: bytes, is_binary: bool) -> None:  # noqa: N802
            arrived = time.time()  # before parsing: the parse is ours, not the server's
            self.factory.probe.on_frame(json.loads(payload), arrived)

        def onClose(self, was_clean: bool, code: int | None, reason: str | None) -> None:  # noqa: N802
            self.factory.probe.lost(f"{code} {reason or ''}")

        def send_json(self, data: dict[str, Any]) -> None:
            self.sendMessage(json.dumps(data).encode())

    return Socket


@dataclass
class LevelResult:
    runs: int
    steps: int
    elapsed_s: float
    latencies_ms: list[float]
    clock: str
    overhead_ms_per_step: float
    failed: int
    first_error: str = ""
    committed_ms: list[float] = field(default_factory=list)  # commit -> arrival, per frame
    # Time inside model.chat per LLM call: the instant server answers in well under 1 ms, so
    # this is mostly the openai SDK's own CPU (and the loop's queue), counted as model time.
    model_ms_per_call: float = 0.0
    stages_ms: dict[str, dict[str, float]] = field(default_factory=dict)  # stage -> p50/p95
    server_cpu_ms_per_step: float | None = None  # the app's processes' CPU (bench_live fills it)
    servers_cpu_ms_per_step: float | None = None  # PostgreSQL's and Redis's (scale profile)
    machine_cpu_ms_per_step: float | None = None  # every process's, this bench's own included
    machine_cores_busy: float | None = None  # of os.cpu_count(), on average over the level

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.elapsed_s if self.elapsed_s else 0.0

    def percentiles(self) -> dict[str, float]:
        v = self.latencies_ms
        return {"p50": percentile(v, 50), "p95": percentile(v, 95), "p99": percentile(v, 99),
                "max": max(v, default=0.0)}

    def committed(self) -> dict[str, float]:
        v = self.committed_ms
        return {"p50": percentile(v, 50), "p95": percentile(v, 95)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LevelResult:
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})

    def as_dict(self) -> dict[str, Any]:
        """The fields (raw latencies included) plus the derived figures."""
        return {**dataclasses.asdict(self), "steps_per_s": self.steps_per_s,
                "latency": self.percentiles(), "frames": len(self.latencies_ms)}


async def run_level(ports: list[int], cookie: str, run_ids: list[int],
                    timeout: float) -> LevelResult:
    """Watch `run_ids` on one socket each (spread over the web processes on `ports`), start
    them all at once, wait for every final."""
    from autobahn.asyncio.websocket import WebSocketClientFactory

    loop = asyncio.get_running_loop()
    socket_class = _socket_class()
    probes, sockets = [Probe(run_id) for run_id in run_ids], []
    for i, probe in enumerate(probes):
        port = ports[i % len(ports)]
        factory = WebSocketClientFactory(f"ws://127.0.0.1:{port}/ws/runs/{probe.run_id}/",
                                         origin=f"http://127.0.0.1:{port}",
                                         headers={"Cookie": cookie})
        factory.protocol = socket_class
        factory.probe = probe
        _transport, proto = await loop.create_connection(factory, "127.0.0.1", port)
        sockets.append(proto)
    await asyncio.wait_for(asyncio.gather(*(p.synced for p in probes)), 30)
    started = time.time()
    for proto in sockets:
        proto.send_json({"action": "start"})
    try:
        await asyncio.wait_for(asyncio.gather(*(p.done for p in probes)), timeout)
    finally:
        for proto in sockets:
            proto.sendClose()
    own = model = 0.0
    for p in probes:
        t = p.totals
        own += ((t.get("wall_ms") or 0) - (t.get("model_ms") or 0) - (t.get("tool_ms") or 0)
                - (t.get("queued_ms") or 0))
        model += t.get("model_ms") or 0
    calls = sum(p.totals.get("llm_calls") or 0 for p in probes)
    # An llm step arrives twice (running, then done): overhead and rate are per recorded step.
    rows = sum(_step_rows(p) for p in probes)
    latencies = [ms for p in probes for ms in p.latencies_ms]
    return LevelResult(
        runs=len(probes), steps=rows, elapsed_s=max(p.finished_at for p in probes) - started,
        latencies_ms=latencies, clock=next((p.clock for p in probes if p.clock), ""),
        overhead_ms_per_step=own / rows if rows else 0.0,
        failed=sum(p.status != "succeeded" for p in probes),
        first_error=next((e for p in probes for e in p.errors), ""),
        committed_ms=[ms for p in probes for ms in p.stages.get(COMMITTED, [])],
        model_ms_per_call=model / calls if calls else 0.0,
        stages_ms=_stage_percentiles(probes),
    )


def _stage_percentiles(probes: list[Probe]) -> dict[str, dict[str, float]]:
    out = {}
    for name, _start, _end in STAGES:
        values = [ms for p in probes for ms in p.stages.get(name, [])]
        if values:
            out[name] = {"p50": percentile(values, 50), "p95": percentile(values, 95)}
    return out


def _step_rows(probe: Probe) -> int:
    t = probe.totals
    # llm + tool steps plus the final step; an error step, if any, is within the frames.
    return (t.get("llm_calls") or 0) + (t.get("tool_calls") or 0) + 1


def main(spec: dict[str, Any]) -> None:
    ports = spec.get("ports") or [spec["port"]]
    result = asyncio.run(run_level(ports, spec["cookie"], spec["runs"], spec["timeout"]))
    print(json.dumps(result.as_dict()))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
