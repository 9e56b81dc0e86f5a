"""manage.py bench_live: how fast recorded steps reach WebSocket clients, and the cost per step
(the goals: docs/ARCHITECTURE.md, "The live path" and "Runs on workers").

Per profile (agentlab/bench/cluster.py), all on loopback and in a throw-away state folder (never
your database): an OpenAI-compatible server (instant, or paced with --model-ms), a
migrate-and-prepare step, and the app: one daphne executing its runs (`web`, the embedded
default), or N daphne and M workers on a throw-away PostgreSQL and Redis (`scale`).
`--profile both` measures the two, one after the other, and prints them side by side. This
process is the browsers: one WebSocket per run (autobahn, which daphne brings), "sync" then
"start" on every socket at once, and a clock on every step frame.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from agentlab.bench.cluster import (
    PROFILES,
    Cluster,
    child_env,
    servers_for,
    spawn,
    start_processes,
    wait_for,
)
from agentlab.bench.stack import tool_calls_for
from agentlab.bench.watch import LevelResult

GOAL_P95_MS, GOAL_P95_AT, GOAL_OVERHEAD_MS = 50.0, 20, 2.0
# Runs on workers (issue 20): against one process, same machine.
GOAL_SPEEDUP, GOAL_CPU_MS, GOAL_PACED_P95_AT = 1.5, 1.5, 100


class Command(BaseCommand):
    help = "Latency of live steps over WebSockets and cost per step, per profile."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--runs", default="1,20,100",
                            help="concurrent runs per level, comma-separated (default 1,20,100)")
        parser.add_argument("--steps", type=int, default=20, help="steps per run (default 20)")
        parser.add_argument("--timeout", type=float, default=300, help="seconds per level")
        parser.add_argument("--profile", choices=[*PROFILES, "both"], default="web",
                            help="web: one process (default); scale: workers on PostgreSQL "
                                 "and Redis; both: the two, side by side")
        parser.add_argument("--web", type=int, default=2,
                            help="web processes of the scale profile (default 2)")
        parser.add_argument("--workers", type=int, default=2,
                            help="worker processes of the scale profile (default 2)")
        parser.add_argument("--model-ms", type=float, default=0,
                            help="the model's answer time per call in ms (default 0: instant)")
        parser.add_argument("--no-warmup", dest="warmup", action="store_false",
                            help="skip the unmeasured level of the largest size that runs "
                                 "before the first figure")
        parser.add_argument("--json", help="also write the figures to this file")
        parser.add_argument("--calls", action="store_true",
                            help="scale profile: also print the SQL statements and Redis "
                                 "commands per step of each level, most frequent first")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            counts = [int(n) for n in opts["runs"].split(",") if n.strip()]
        except ValueError:
            raise CommandError("--runs takes whole numbers, e.g. 1,20,100") from None
        if not counts or min(counts) < 1 or opts["steps"] < 2:
            raise CommandError("--runs needs numbers ≥ 1 and --steps a number ≥ 2")
        if opts["web"] < 1 or opts["workers"] < 1 or opts["model_ms"] < 0:
            raise CommandError("--web and --workers need at least 1, --model-ms ≥ 0")
        profiles = list(PROFILES) if opts["profile"] == "both" else [opts["profile"]]
        measured = {}
        for profile in profiles:
            self.say(f"== profile {profile}: {self.describe(profile, opts)}")
            measured[profile] = self.measure(profile, counts, opts)
            self.report(measured[profile])
        if len(measured) == 2:
            self.side_by_side(measured["web"], measured["scale"], opts)
        if opts["json"]:
            Path(opts["json"]).write_text(json.dumps(
                {p: [r.as_dict() for r in rs] for p, rs in measured.items()}, indent=2))

    def describe(self, profile: str, opts: dict[str, Any]) -> str:
        model = f"a model answering in {opts['model_ms']:g} ms" if opts["model_ms"] else \
            "an instant model"
        if profile == "web":
            return f"one daphne executing its runs, SQLite, {model}"
        return (f"{opts['web']} daphne + {opts['workers']} workers, PostgreSQL + Redis, "
                f"{model}")

    def measure(self, profile: str, counts: list[int], opts: dict[str, Any]
                ) -> list[LevelResult]:
        with tempfile.TemporaryDirectory(prefix="agentlab-bench-") as tmp, ExitStack() as stack:
            scale = profile == "scale"
            cluster = Cluster(profile, web=opts["web"] if scale else 1,
                              workers=opts["workers"] if scale else 0, env=child_env(Path(tmp)))
            if scale:
                self.say("starting PostgreSQL and Redis …")
                servers_for(cluster, stack, statements=opts["calls"])
            # Warm-up, not measured: one run, then as many at once as the largest level, so
            # every process's pools (PostgreSQL, Redis, the model's connections) are full
            # before the first figure: without it the first level read 10–20 % slower.
            warm = max(counts) if opts["warmup"] else 0
            prepared = self.start(cluster, Path(tmp), [1, *([warm] if warm else []), *counts],
                                  opts, stack)
            first, *levels = prepared["runs"]
            self.say("warm-up run …")
            self.watch(cluster, prepared, first, opts["timeout"])
            if warm:
                self.say(f"warm-up: {warm} runs at once …")
                self.watch(cluster, prepared, levels.pop(0), opts["timeout"])
            results = []
            for n, run_ids in zip(counts, levels, strict=True):
                self.say(f"{n} concurrent run(s) × ~{opts['steps']} steps …")
                result = self.watch(cluster, prepared, run_ids, opts["timeout"],
                                    calls=opts["calls"] and scale)
                self.say(f"  {result.steps} steps in {result.elapsed_s:.2f} s, "
                         f"{result.failed} failed run(s)")
                if result.first_error:
                    self.say(f"  first error: {result.first_error[:300]}")
                results.append(result)
        return results

    def watch(self, cluster: Cluster, prepared: dict[str, Any], run_ids: list[int],
              timeout: float, *, calls: bool = False) -> LevelResult:
        """One level, watched by the browser stand-in process (agentlab/bench/watch.py)."""
        spec = {"ports": cluster.ports, "runs": run_ids, "timeout": timeout,
                "cookie": f"{prepared['session_cookie']}={prepared['session']}"}
        calls_before = cluster.calls() if calls else None
        before, began = cluster.cpu_ms(), time.monotonic()
        done = subprocess.run([sys.executable, "-m", "agentlab.bench.watch", json.dumps(spec)],
                              env=cluster.env, cwd=str(settings.BASE_DIR), capture_output=True,
                              text=True, timeout=timeout + 60)
        if done.returncode:
            raise CommandError(f"watching {len(run_ids)} run(s) failed:\n{done.stderr[-2000:]}")
        result = LevelResult.from_dict(json.loads(done.stdout.strip().splitlines()[-1]))
        after = cluster.cpu_ms()
        if result.steps:
            result.server_cpu_ms_per_step = (after["app"] - before["app"]) / result.steps
            if cluster.postgres is not None:
                result.servers_cpu_ms_per_step = \
                    (after["servers"] - before["servers"]) / result.steps
            if after["machine"]:
                result.machine_cpu_ms_per_step = \
                    (after["machine"] - before["machine"]) / result.steps
                # Over the same window as the CPU (the sockets' connect and sync included).
                result.machine_cores_busy = \
                    (after["machine"] - before["machine"]) / 1000 / (time.monotonic() - began)
            if calls_before is not None:
                self.print_calls(cluster.calls() - calls_before, result.steps)
        return result

    def print_calls(self, calls: Counter[str], steps: int) -> None:
        """What PostgreSQL and Redis were asked, per step (the bench's own setup included)."""
        self.say(f"  per step ({steps} steps): SQL statements "
                 f"{sum(n for k, n in calls.items() if k.startswith('sql')) / steps:.2f}, "
                 f"Redis commands "
                 f"{sum(n for k, n in calls.items() if k.startswith('redis')) / steps:.2f}")
        for name, n in calls.most_common(25):
            self.say(f"    {n / steps:7.3f}  {name}")

    def say(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()

    def start(self, cluster: Cluster, tmp: Path, counts: list[int], opts: dict[str, Any],
              stack: ExitStack) -> dict[str, Any]:
        py, cwd, env = sys.executable, str(settings.BASE_DIR), cluster.env
        port_file = tmp / "llm.port"
        self.say("starting the OpenAI-compatible server …")
        llm = spawn(stack, [py, "-m", "agentlab.bench.stack", "llm", str(port_file),
                            str(tool_calls_for(opts["steps"])), str(opts["model_ms"] / 1000)],
                    env)
        llm_port = wait_for(lambda: port_file.exists() and port_file.read_text(),
                            "the model server", 20, llm)
        self.say(f"preparing {sum(counts)} runs (migrate) …")
        done = subprocess.run([py, "-m", "agentlab.bench.stack", "prepare",
                               f"http://127.0.0.1:{llm_port}/v1", ",".join(map(str, counts)),
                               str(opts["steps"])], env=env, cwd=cwd, capture_output=True,
                              text=True, timeout=300)
        if done.returncode:
            raise CommandError(f"preparing the bench failed:\n{done.stderr[-2000:]}")
        prepared = json.loads(done.stdout.strip().splitlines()[-1])
        self.say(f"starting {cluster.web} daphne"
                 + (f" and {cluster.workers} workers" if cluster.workers else "") + " …")
        start_processes(cluster, stack)
        return prepared

    def report(self, results: list[LevelResult]) -> None:
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
                # Work moved to another thread is still counted: each process's whole CPU.
                servers = "" if r.servers_cpu_ms_per_step is None else (
                    f", + {r.servers_cpu_ms_per_step:.2f} ms in PostgreSQL and Redis")
                self.say(f"{r.runs:>5} run(s): the app's processes used "
                         f"{r.server_cpu_ms_per_step:.2f} ms of CPU per step (all their "
                         f"threads: runs, recorder, sockets){servers}")
        for r in results:
            if r.machine_cpu_ms_per_step is not None and r.machine_cores_busy is not None:
                self.say(f"{r.runs:>5} run(s): the whole machine used "
                         f"{r.machine_cpu_ms_per_step:.2f} ms of CPU per step, "
                         f"{r.machine_cores_busy:.2f} of its "
                         f"{os.cpu_count()} cores busy (this bench's browsers and model "
                         "server included)")
        for r in results:
            c = r.committed()
            self.say(f"{r.runs:>5} run(s): committed → arrival p50 {c['p50']:.1f} / p95 "
                     f"{c['p95']:.1f} ms; model time {r.model_ms_per_call:.2f} ms per LLM call "
                     "(the instant server's answer plus the openai SDK's own CPU)")
        for r in results:
            if len(r.stages_ms) > 2:  # the scale profile's stamps: where the time went
                self.say(f"{r.runs:>5} run(s): p50 / p95 ms per stage: " + "; ".join(
                    f"{name} {v['p50']:.1f} / {v['p95']:.1f}" for name, v in r.stages_ms.items()))
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

    def side_by_side(self, web: list[LevelResult], scale: list[LevelResult],
                     opts: dict[str, Any]) -> None:
        self.say("")
        self.say(f"side by side: one process vs {opts['web']} web + {opts['workers']} workers")
        head = (f"{'runs':>5} {'steps/s 1 proc':>15} {'steps/s scale':>14} {'×':>5} "
                f"{'CPU ms/step 1 proc':>19} {'CPU ms/step scale':>18} {'+PG/Redis':>10} "
                f"{'p95 ms 1 proc':>14} {'p95 ms scale':>13}")
        self.say(head)
        self.say("-" * len(head))
        for a, b in zip(web, scale, strict=True):
            ratio = b.steps_per_s / a.steps_per_s if a.steps_per_s else 0.0
            self.say(f"{a.runs:>5} {a.steps_per_s:>15.0f} {b.steps_per_s:>14.0f} {ratio:>5.2f} "
                     f"{a.server_cpu_ms_per_step or 0:>19.2f} "
                     f"{b.server_cpu_ms_per_step or 0:>18.2f} "
                     f"{b.servers_cpu_ms_per_step or 0:>10.2f} "
                     f"{a.percentiles()['p95']:>14.1f} {b.percentiles()['p95']:>13.1f}")
        top_a, top_b = max(web, key=lambda r: r.runs), max(scale, key=lambda r: r.runs)
        ratio = top_b.steps_per_s / top_a.steps_per_s if top_a.steps_per_s else 0.0
        self.say(f"goal throughput ≥ {GOAL_SPEEDUP:g}× one process (at {top_a.runs} runs): "
                 f"{'met' if ratio >= GOAL_SPEEDUP else 'not met'} ({ratio:.2f}×)")
        if top_a.machine_cpu_ms_per_step and top_b.machine_cpu_ms_per_step:
            # Every process shares the same cores: steps/s can reach at most cores / CPU per step.
            cores = os.cpu_count() or 1
            budget = cores * 1000 / (GOAL_SPEEDUP * top_a.steps_per_s)
            self.say(f"  the ceiling here: {cores} cores, shared by every process. "
                     f"{GOAL_SPEEDUP:g}× needs all of them together under {budget:.2f} ms of "
                     f"CPU per step; one process's level used "
                     f"{top_a.machine_cpu_ms_per_step:.2f}, the scale profile's "
                     f"{top_b.machine_cpu_ms_per_step:.2f}")
        cpu = (top_b.server_cpu_ms_per_step or 0) + (top_b.servers_cpu_ms_per_step or 0)
        self.say(f"goal CPU < {GOAL_CPU_MS:g} ms/step, all processes (at {top_b.runs} runs): "
                 f"{'met' if cpu < GOAL_CPU_MS else 'not met'} ({cpu:.2f} ms)")
        paced = [r for r in scale if r.runs == GOAL_PACED_P95_AT]
        if paced and opts["model_ms"]:
            p95 = paced[0].percentiles()["p95"]
            self.say(f"goal p95 < {GOAL_P95_MS:g} ms at {GOAL_PACED_P95_AT} runs, model "
                     f"{opts['model_ms']:g} ms: {'met' if p95 < GOAL_P95_MS else 'not met'} "
                     f"({p95:.1f} ms)")
