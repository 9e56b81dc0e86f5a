"""The scenarios of `manage.py bench_task_queues`: each queue against the criteria of issue 20.

Real servers (agentlab/bench/servers.py: PostgreSQL and Redis on free ports) and real worker
processes (agentlab/bench/task_queues.py); every figure comes from the shared events file.

1. durable: a job deferred while no worker is up runs when one starts;
2. concurrency: 100 jobs of 0.5 s on one worker process: wall time and the peak of jobs running
   at once (the goal is at least 50 runs per worker);
3. cost: 300 empty jobs on one worker: jobs/s and the worker's CPU per job;
4. SIGTERM: what happens to a job running when its worker is asked to stop;
5. SIGKILL: seconds from killing the worker that runs a job to its start on another worker.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentlab.bench import task_queues
from agentlab.bench.servers import PostgresServer, RedisServer

ROOT = Path(__file__).resolve().parents[2]
CONCURRENT_JOBS, CONCURRENT_S, COST_JOBS = 100, 0.5, 300
KILL_JOB_S = 15.0  # under arq's job timeout, so arq may run it at all
# The rows of the table, one per criterion.
DURABLE = "durable (deferred, then a worker)"
CONCURRENT = f"{CONCURRENT_JOBS} jobs of {CONCURRENT_S} s, one worker"
COST = f"{COST_JOBS} empty jobs"
SIGTERM = "SIGTERM mid-job"
SIGKILL = "SIGKILL mid-job"


@dataclass
class Result:
    queue: str
    figures: dict[str, str] = field(default_factory=dict)
    takeover_s: float | None = None


class Bench:
    def __init__(self, queue: str, say: Callable[[str], None]) -> None:
        """Its servers and events file are in this process's AGENTLAB_BENCH_* variables (set
        by `measure`): task_queues.py's client calls here and its workers read the same ones."""
        self.queue, self.say = queue, say
        self.events = Path(os.environ["AGENTLAB_BENCH_EVENTS"])
        self.env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.prepare, self.defer, _ = task_queues.QUEUES[queue]
        self.workers: list[subprocess.Popen[bytes]] = []

    # -- helpers
    def worker(self, concurrency: int = CONCURRENT_JOBS) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentlab.bench.task_queues", "worker", self.queue,
             str(concurrency)], cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        self.workers.append(proc)
        return proc

    def submit(self, jobs: list[tuple[str, float]]) -> None:
        asyncio.run(self.defer(jobs))

    def events_of(self, keys: set[str]) -> list[dict[str, Any]]:
        return [e for e in task_queues.read_events(self.events) if e["key"] in keys]

    def wait(self, done: Callable[[list[dict[str, Any]]], bool], keys: set[str],
             timeout: float) -> list[dict[str, Any]] | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if done(events := self.events_of(keys)):
                return events
            time.sleep(0.05)
        return None

    def ended(self, keys: set[str], timeout: float) -> list[dict[str, Any]] | None:
        return self.wait(lambda ev: {e["key"] for e in ev if e["event"] == "end"} >= keys,
                         keys, timeout)

    def stop_all(self) -> None:
        for proc in self.workers:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        self.workers.clear()

    # -- the scenarios
    def run(self) -> Result:
        result = Result(self.queue)
        asyncio.run(self.prepare())
        try:
            self.durable_and_concurrent(result)
            self.cost(result)
            self.sigterm(result)
            self.sigkill(result)
        finally:
            self.stop_all()
        return result

    def durable_and_concurrent(self, result: Result) -> None:
        self.say(f"{self.queue}: a job deferred with no worker up, then a worker")
        first = _key("durable")
        self.submit([(first, 0.0)])
        started = time.time()
        self.worker()
        ran = self.ended({first}, 30)
        result.figures[DURABLE] = (
            f"ran {ran[-1]['t'] - started:.1f} s after the worker started" if ran else "never ran")
        self.say(f"{self.queue}: {CONCURRENT_JOBS} jobs of {CONCURRENT_S} s on one worker")
        keys = [_key("c") for _ in range(CONCURRENT_JOBS)]
        t0 = time.time()
        self.submit([(k, CONCURRENT_S) for k in keys])
        events = self.ended(set(keys), 60)
        if events is None:
            result.figures[CONCURRENT] = "did not finish in 60 s"
            return
        wall = max(e["t"] for e in events if e["event"] == "end") - t0
        result.figures[CONCURRENT] = (
            f"{wall:.2f} s, at most {_peak(events)} at once")

    def cost(self, result: Result) -> None:
        self.say(f"{self.queue}: {COST_JOBS} empty jobs on one worker")
        proc = self.workers[-1]
        keys = [_key("e") for _ in range(COST_JOBS)]
        cpu0, t0 = _cpu_s(proc.pid), time.time()
        self.submit([(k, 0.0) for k in keys])
        events = self.ended(set(keys), 120)
        if events is None:
            result.figures[COST] = "did not finish in 120 s"
            return
        wall = max(e["t"] for e in events) - t0
        cpu = _cpu_s(proc.pid) - cpu0
        result.figures[COST] = (
            f"{COST_JOBS / wall:.0f} jobs/s, worker CPU {cpu / COST_JOBS * 1000:.2f} ms/job")

    def sigterm(self, result: Result) -> None:
        self.say(f"{self.queue}: SIGTERM to a worker running a 3 s job")
        proc, key = self.workers[-1], _key("term")
        self.submit([(key, 3.0)])
        if self.wait(lambda ev: bool(ev), {key}, 30) is None:
            result.figures[SIGTERM] = "the job never started"
            return
        proc.send_signal(signal.SIGTERM)
        t0 = time.time()
        try:
            proc.wait(40)
            exited = f"worker exited after {time.time() - t0:.1f} s"
        except subprocess.TimeoutExpired:
            exited = "worker still up after 40 s"
        done = any(e["event"] == "end" for e in self.events_of({key}))
        if done:
            verdict = "the job finished first"
        else:  # cancelled: does the next worker run it again?
            self.worker()
            again = self.ended({key}, 45)
            verdict = ("cancelled; the next worker ran it again" if again
                       else "cancelled and lost (not run again in 45 s)")
        result.figures[SIGTERM] = f"{verdict}; {exited}"

    def sigkill(self, result: Result) -> None:
        self.say(f"{self.queue}: SIGKILL to the worker running a job, another worker idle")
        self.stop_all()
        first, key = self.worker(), _key("kill")
        self.submit([(key, KILL_JOB_S)])
        if self.wait(lambda ev: bool(ev), {key}, 30) is None:
            result.figures[SIGKILL] = "the job never started"
            return
        self.worker()
        time.sleep(3)  # the second worker is up and polling
        first.kill()
        killed = time.time()
        again = self.wait(lambda ev: any(e["event"] == "start" and e["pid"] != first.pid
                                         for e in ev), {key}, 60)
        if again is None:
            result.figures[SIGKILL] = "not taken over within 60 s"
            return
        restart = next(e["t"] for e in again if e["event"] == "start" and e["pid"] != first.pid)
        result.takeover_s = restart - killed
        result.figures[SIGKILL] = f"started again on another worker after " \
                                            f"{result.takeover_s:.1f} s"


def _key(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _peak(events: list[dict[str, Any]]) -> int:
    """The most jobs running at one moment (a start before an end at the same instant)."""
    running = peak = 0
    for e in sorted(events, key=lambda e: (e["t"], e["event"] == "end")):
        running += 1 if e["event"] == "start" else -1
        peak = max(peak, running)
    return peak


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(names: list[str], say: Callable[[str], None]) -> list[Result]:
    folder = Path(tempfile.mkdtemp(prefix="agentlab-queues-"))
    postgres = PostgresServer().start()
    try:
        redis = RedisServer(folder).start()
    except BaseException:
        postgres.stop()
        raise
    try:
        results = []
        for name in names:
            os.environ.update({
                "AGENTLAB_BENCH_PG": postgres.url.replace("postgres://", "postgresql://"),
                "AGENTLAB_BENCH_REDIS": redis.url,
                "AGENTLAB_BENCH_EVENTS": str(folder / f"{name}.jsonl")})
            results.append(Bench(name, say).run())
        return results
    finally:
        for name in ("PG", "REDIS", "EVENTS"):
            os.environ.pop(f"AGENTLAB_BENCH_{name}", None)
        redis.stop()
        postgres.stop()


def table(results: list[Result]) -> list[str]:
    """The queues side by side, then the takeover times as bars (a second each)."""
    rows = list(dict.fromkeys(k for r in results for k in r.figures))
    width = max(len(r) for r in rows)
    lines = [f"{'':{width}}  " + "  |  ".join(r.queue for r in results)]
    for row in rows:
        lines.append(f"{row:{width}}  " + "  |  ".join(r.figures.get(row, "-") for r in results))
    lines.append("")
    lines.append("SIGKILL → the job starts on another worker (one ■ per second):")
    for r in results:
        bar = "■" * round(r.takeover_s) if r.takeover_s is not None else "never"
        took = f" {r.takeover_s:.1f} s" if r.takeover_s is not None else ""
        lines.append(f"  {r.queue:14} {bar}{took}")
    return lines
