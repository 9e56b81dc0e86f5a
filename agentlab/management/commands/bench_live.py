"""manage.py bench_live: how fast recorded steps reach WebSocket clients, and the runtime's
own cost per step (the goals: docs/ARCHITECTURE.md, "The live path").

Three processes besides this one, all on loopback and all in a throw-away state folder (never
your database): an instant OpenAI-compatible server, a migrate-and-prepare step, and daphne
serving the real app. This process is the browsers: one WebSocket per run (autobahn, which
daphne brings), "sync" then "start" on every socket at once, and a clock on every step frame.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from agentlab.bench.stack import tool_calls_for
from agentlab.bench.watch import LevelResult

GOAL_P95_MS, GOAL_P95_AT, GOAL_OVERHEAD_MS = 50.0, 20, 2.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def process_cpu_ms(pid: int) -> float | None:
    """User + system CPU of a process so far, in ms (Linux /proc; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def wait_for(check: Any, what: str, timeout: float, proc: subprocess.Popen | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise CommandError(f"{what} exited with code {proc.returncode}")
        try:
            if result := check():
                return result
        except OSError:
            pass
        time.sleep(0.1)
    raise CommandError(f"{what} did not come up within {timeout:g} s")


class Command(BaseCommand):
    help = "Latency of live steps over WebSockets and runtime overhead per step."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--runs", default="1,20,100",
                            help="concurrent runs per level, comma-separated (default 1,20,100)")
        parser.add_argument("--steps", type=int, default=20, help="steps per run (default 20)")
        parser.add_argument("--timeout", type=float, default=300, help="seconds per level")
        parser.add_argument("--json", help="also write the figures to this file")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            counts = [int(n) for n in opts["runs"].split(",") if n.strip()]
        except ValueError:
            raise CommandError("--runs takes whole numbers, e.g. 1,20,100") from None
        if not counts or min(counts) < 1 or opts["steps"] < 2:
            raise CommandError("--runs needs numbers ≥ 1 and --steps a number ≥ 2")
        with tempfile.TemporaryDirectory(prefix="agentlab-bench-") as tmp, ExitStack() as stack:
            env = self.child_env(Path(tmp))
            # One unreported run first: imports, template loading and first connections.
            port, prepared = self.start(env, Path(tmp), [1, *counts], opts["steps"], stack)
            warmup, *levels = prepared["runs"]
            self.say("warm-up run …")
            self.watch(env, port, prepared, warmup, opts["timeout"])
            results = []
            for n, run_ids in zip(counts, levels, strict=True):
                self.say(f"{n} concurrent run(s) × ~{opts['steps']} steps …")
                result = self.watch(env, port, prepared, run_ids, opts["timeout"])
                self.say(f"  {result.steps} steps in {result.elapsed_s:.2f} s, "
                         f"{result.failed} failed run(s)")
                if result.first_error:
                    self.say(f"  first error: {result.first_error[:300]}")
                results.append(result)
        self.report(results, opts["steps"])
        if opts["json"]:
            Path(opts["json"]).write_text(json.dumps([r.as_dict() for r in results], indent=2))

    def watch(self, env: dict[str, str], port: int, prepared: dict[str, Any], run_ids: list[int],
              timeout: float) -> LevelResult:
        """One level, watched by the browser stand-in process (agentlab/bench/watch.py)."""
        spec = {"port": port, "runs": run_ids, "timeout": timeout,
                "cookie": f"{prepared['session_cookie']}={prepared['session']}"}
        cpu_before = process_cpu_ms(self.server_pid)
        done = subprocess.run([sys.executable, "-m", "agentlab.bench.watch", json.dumps(spec)],
                              env=env, cwd=str(settings.BASE_DIR), capture_output=True,
                              text=True, timeout=timeout + 60)
        if done.returncode:
            raise CommandError(f"watching {len(run_ids)} run(s) failed:\n{done.stderr[-2000:]}")
        result = LevelResult.from_dict(json.loads(done.stdout.strip().splitlines()[-1]))
        cpu_after = process_cpu_ms(self.server_pid)
        if cpu_before is not None and cpu_after is not None and result.steps:
            result.server_cpu_ms_per_step = (cpu_after - cpu_before) / result.steps
        return result

    def say(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()

    def child_env(self, tmp: Path) -> dict[str, str]:
        env = {**os.environ, "AGENTLAB_VAR_DIR": str(tmp), "ALLOWED_HOSTS": "127.0.0.1",
               "DEBUG": "false", "LOG_LEVEL": "WARNING"}
        env.pop("DATABASE_URL", None)  # always a fresh SQLite file in the temp folder
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(settings.BASE_DIR),
                                                          env.get("PYTHONPATH")]))
        return env

    def start(self, env: dict[str, str], tmp: Path, counts: list[int], steps: int,
              stack: ExitStack) -> tuple[int, dict[str, Any]]:
        py, cwd = sys.executable, str(settings.BASE_DIR)
        port_file = tmp / "llm.port"
        self.say("starting the instant OpenAI-compatible server …")
        llm = self.spawn(stack, [py, "-m", "agentlab.bench.stack", "llm", str(port_file),
                                 str(tool_calls_for(steps))], env, cwd)
        llm_port = wait_for(lambda: port_file.exists() and port_file.read_text(),
                            "the instant model server", 20, llm)
        self.say(f"preparing {sum(counts)} runs in {tmp} (migrate) …")
        done = subprocess.run([py, "-m", "agentlab.bench.stack", "prepare",
                               f"http://127.0.0.1:{llm_port}/v1", ",".join(map(str, counts)),
                               str(steps)], env=env, cwd=cwd, capture_output=True, text=True,
                              timeout=300)
        if done.returncode:
            raise CommandError(f"preparing the bench failed:\n{done.stderr[-2000:]}")
        prepared = json.loads(done.stdout.strip().splitlines()[-1])
        port = free_port()
        self.say(f"starting daphne on 127.0.0.1:{port} …")
        daphne = self.spawn(stack, [py, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                                    "-v", "0", "agentlab.asgi:application"], env, cwd)
        url = f"http://127.0.0.1:{port}/healthz"
        wait_for(lambda: urllib.request.urlopen(url, timeout=2).status == 200, "daphne", 60,
                 daphne)
        self.server_pid = daphne.pid
        return port, prepared

    def spawn(self, stack: ExitStack, cmd: list[str], env: dict[str, str],
              cwd: str) -> subprocess.Popen:
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL)

        def stop() -> None:  # only the processes this command started, by their handle
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()

        stack.callback(stop)
        return proc

    def report(self, results: list[LevelResult], steps: int) -> None:
        clock = {r.clock for r in results if r.latencies_ms}
        self.say("")
        self.say(f"latency clock: {', '.join(sorted(clock)) or '-'}")
        head = (f"{'runs':>5} {'steps':>6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} "
                f"{'max ms':>8} {'steps/s':>8} {'overhead ms/step':>17} {'failed':>6}")
        self.say(head)
        self.say("-" * len(head))
        for r in results:
            p = r.percentiles()
            self.say(f"{r.runs:>5} {r.steps:>6} {p['p50']:>8.1f} {p['p95']:>8.1f} "
                     f"{p['p99']:>8.1f} {p['max']:>8.1f} {r.steps_per_s:>8.0f} "
                     f"{r.overhead_ms_per_step:>17.2f} {r.failed:>6}")
        self.say("")
        for r in results:
            if r.server_cpu_ms_per_step is not None:
                # Work moved to another thread is still here: the server's whole CPU per step.
                self.say(f"{r.runs:>5} run(s): the server process used "
                         f"{r.server_cpu_ms_per_step:.2f} ms of CPU per step (all its threads: "
                         "runs, recorder, sockets)")
        for r in results:
            c = r.committed()
            self.say(f"{r.runs:>5} run(s): committed → arrival p50 {c['p50']:.1f} / p95 "
                     f"{c['p95']:.1f} ms; model time {r.model_ms_per_call:.2f} ms per LLM call "
                     "(the instant server's answer plus the openai SDK's own CPU)")
        self.say("")
        at = [r for r in results if r.runs == GOAL_P95_AT]
        if at:
            p95 = at[0].percentiles()["p95"]
            met = "met" if p95 < GOAL_P95_MS else "not met"
            self.say(f"goal p95 < {GOAL_P95_MS:g} ms at {GOAL_P95_AT} runs: {met} ({p95:.1f} ms)")
        else:
            self.say(f"goal p95 < {GOAL_P95_MS:g} ms at {GOAL_P95_AT} runs: not measured "
                     f"(add {GOAL_P95_AT} to --runs)")
        # The runtime's own cost is read where runs do not wait on each other: the lowest level.
        base = min(results, key=lambda r: r.runs)
        met = "met" if base.overhead_ms_per_step < GOAL_OVERHEAD_MS else "not met"
        self.say(f"goal overhead < {GOAL_OVERHEAD_MS:g} ms/step (at {base.runs} run(s)): {met} "
                 f"({base.overhead_ms_per_step:.2f} ms/step)")
        if any(r.failed for r in results):
            self.say(self.style.WARNING("some runs did not succeed; see the figures above"))
