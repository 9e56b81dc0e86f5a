"""manage.py bench_gateway: the latency the gateway (POST /gateway/v1/chat/completions) adds
over a direct call to the same model server, beside LiteLLM's proxy on the same machine (the
goals: issue 40, "Performance"; docs/GATEWAY.md, "Performance").

Every endpoint is a real process on loopback in front of the same scripted OpenAI-compatible
servers (agentlab/bench/gateway.py): the server itself (the direct call), Agent
Lab's gateway in one daphne with a throw-away SQLite state folder, recording on as by default,
and LiteLLM's proxy from its own virtualenv (requirements-litellm.txt). The clients are the
real openai SDK (agentlab/bench/gateway_load.py). The figures, at 1 client (sequential calls)
and N concurrent clients: the non-streamed call's total time and the streamed call's time to
first token, p50 and p99, each endpoint's minus the direct call's (the same percentile), and
the CPU each proxy process spends per call.

One client calls a model that answers at once: each call's figure is the proxy's overhead and
nothing else. The concurrent clients call a model that answers after --model-ms (500 by
default), as agents wait on a hosted model, their starts spread over that time (agents do not
call in step): with an instant model, 50 clients that call again the moment they are answered
saturate any machine (on 2 cores the direct call alone then waits ~100 ms at p50 in the
clients' own queue), and every figure is queueing; --model-ms 0 measures that case.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from agentlab.bench.cluster import child_env
from agentlab.bench.gateway import (
    LITELLM_INSTALL,
    LITELLM_VERSION,
    MODEL,
    PACED,
    Endpoint,
    litellm_python,
    settled,
    start_gateway,
    start_litellm,
    start_upstream,
)
from agentlab.bench.gateway_load import MODES, Figures, Sample, measure
from agentlab.bench.watch import percentile

GOALS = {50: 2.0, 99: 5.0}  # ms added, at every level and in both modes
DIRECT, LAB = "direct", "Agent Lab"
MODE_NAMES = {False: "non-streamed total", True: "streamed TTFT"}


class Command(BaseCommand):
    help = "Gateway: latency added over a direct call, 1 and N clients; beside LiteLLM."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--calls", type=int, default=400,
                            help="sequential calls per endpoint and mode (default 400)")
        parser.add_argument("--clients", type=int, default=50,
                            help="concurrent clients of the second level (default 50) …")
        parser.add_argument("--client-calls", type=int, default=20,
                            help="… each making this many calls per mode (default 20) …")
        parser.add_argument("--model-ms", type=float, default=500,
                            help="… to a model that answers after this long (default 500; "
                                 "0: at once, a saturated machine)")
        parser.add_argument("--rounds", type=int, default=4,
                            help="turns the endpoints take at each level (default 4)")
        parser.add_argument("--warmup", type=int, default=10,
                            help="calls first, not counted, per mode: of the one client "
                                 "(default 10); each concurrent client makes one")
        parser.add_argument("--calls-per-run", type=int, default=10,
                            help="calls a client makes under one traceparent (default 10)")
        parser.add_argument("--litellm-python",
                            help="the Python of LiteLLM's virtualenv (default: "
                                 "AGENTLAB_LITELLM_PYTHON, else the one scripts/lib.sh "
                                 "ensure_litellm makes; absent: not measured)")
        parser.add_argument("--skip-litellm", action="store_true",
                            help="measure the gateway only")
        parser.add_argument("--json", help="also write every call's figure to this file")

    def handle(self, *args: Any, **opts: Any) -> None:
        sizes = ("calls", "clients", "client_calls", "rounds", "calls_per_run")
        if any(opts[k] < 1 for k in sizes) or opts["warmup"] < 0 or opts["model_ms"] < 0:
            raise CommandError("--calls, --clients, --client-calls, --rounds and "
                               "--calls-per-run need numbers ≥ 1, --warmup and --model-ms ≥ 0")
        if opts["clients"] < 2:
            raise CommandError("--clients is the concurrent level: 2 or more (1 client is "
                               "always measured)")
        python = Path(opts["litellm_python"]) if opts["litellm_python"] else litellm_python()
        if opts["litellm_python"] and not python.exists():
            raise CommandError(f"no LiteLLM at {python} (make it with: {LITELLM_INSTALL})")
        anchor = ("skipped" if opts["skip_litellm"] else
                  None if python.exists() else f"not installed: {LITELLM_INSTALL}")
        levels = [(1, opts["calls"]), (opts["clients"], opts["client_calls"])]
        warmups = {1: opts["warmup"], opts["clients"]: min(opts["warmup"], 1)}
        with tempfile.TemporaryDirectory(prefix="agentlab-bench-gateway-") as tmp, \
                ExitStack() as stack:
            folder = Path(tmp)
            env = child_env(folder)
            self.say("starting the scripted OpenAI-compatible servers (at once, and after "
                     f"{opts['model_ms']:g} ms) …")
            upstreams = [start_upstream(stack, folder, env),
                         start_upstream(stack, folder, env, PACED, opts["model_ms"])]
            self.say("starting Agent Lab (migrate, a user, a gateway token, the model "
                     "profiles, daphne) …")
            proxies = [start_gateway(stack, env, upstreams)]
            if anchor is None:
                self.say(f"starting LiteLLM {LITELLM_VERSION} ({python}) …")
                proxies.append(start_litellm(stack, folder, python, upstreams))
            load_before = _load()
            figures: Figures = {}
            for (clients, per_client), upstream in zip(levels, upstreams, strict=True):
                endpoints = [upstream, *(replace(p, model=upstream.model) for p in proxies)]
                self.say(f"{clients} client(s) × {per_client} calls per mode to {upstream.model}"
                         f", {len(endpoints)} endpoints taking turns …")
                stagger = opts["model_ms"] / 1000 if clients > 1 else 0.0
                asyncio.run(measure(endpoints, clients, per_client, opts["rounds"],
                                    warmups[clients], opts["calls_per_run"], figures, stagger,
                                    self.say))
            load_after = _load()
            answered = sum(len(s.ms) + warmups[clients] * clients
                           for clients, by_mode in figures[LAB].items()
                           for s in by_mode.values())
            steps, runs = settled(folder / "agentlab.sqlite3", answered, timeout=60)
        self.table(figures, [upstreams[0], *proxies], levels, anchor)
        self.say(f"models: 1 client → {MODEL} (answers at once); {opts['clients']} clients → "
                 f"{PACED} (answers after {opts['model_ms']:g} ms)")
        self.say(f"recording: {steps:,} llm steps in {runs:,} runs for the {answered:,} calls "
                 "the gateway answered (warm-up included)")
        self.say(f"load average before / after (1/5/15 min): {load_before} / {load_after} "
                 f"on {os.cpu_count()} cores; the clients, the scripted server and every proxy "
                 "share them")
        if opts["json"]:
            Path(opts["json"]).write_text(json.dumps(
                {name: {str(c): {MODE_NAMES[s]: sample.as_dict() for s, sample in m.items()}
                        for c, m in by_level.items()} for name, by_level in figures.items()}
                | {"recording": {"llm_steps": steps, "runs": runs, "answered": answered}},
                indent=2))

    # ------------------------------------------------------------------ the table

    def table(self, figures: Figures, endpoints: list[Endpoint],
              levels: list[tuple[int, int]], anchor: str | None) -> None:
        litellm = next((e.name for e in endpoints if e.name.startswith("LiteLLM")), None)
        rows = []
        for clients, _n in levels:
            who = "1 client" if clients == 1 else f"{clients} clients"
            for stream in MODES:
                for q, goal in GOALS.items():
                    rows.append((f"added p{q}, {MODE_NAMES[stream]}, {who}", f"< {goal:g} ms",
                                 _added(figures, LAB, clients, stream, q),
                                 anchor or _added(figures, litellm, clients, stream, q)))
            rows.append((f"proxy CPU per call, {who}", "—", _cpu(figures[LAB][clients]),
                         anchor or _cpu(figures[litellm][clients])))
        head = ("figure", "goal", LAB, f"LiteLLM {LITELLM_VERSION}")
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
        self.say("")
        self.say("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip())
        self.say("  ".join("-" * w for w in widths))
        for row in rows:
            self.say("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        self.say("")
        self.goals(figures, levels)
        self.say("the calls themselves, p50 / p99 ms (calls):")
        for e in endpoints:
            for clients, _n in levels:
                cells = []
                for stream in MODES:
                    s = figures[e.name][clients][stream]
                    cells.append(f"{MODE_NAMES[stream]} {percentile(s.ms, 50):.2f} / "
                                 f"{percentile(s.ms, 99):.2f} ({len(s.ms):,}"
                                 + (f", {s.errors} errors: {s.first_error[:200]}" if s.errors
                                    else "") + ")")
                self.say(f"  {e.name}, {clients} client(s): " + "; ".join(cells))

    def goals(self, figures: Figures, levels: list[tuple[int, int]]) -> None:
        missed = []
        for clients, _n in levels:
            for stream in MODES:
                for q, goal in GOALS.items():
                    added = _added_ms(figures, LAB, clients, stream, q)
                    if added is None or added >= goal:
                        missed.append(f"p{q} {MODE_NAMES[stream]} at {clients}")
        met = "met" if not missed else "not met (" + ", ".join(missed) + ")"
        self.say(f"goal p50 < {GOALS[50]:g} ms and p99 < {GOALS[99]:g} ms added, "
                 f"recording on: {met}")

    def say(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()


def _added_ms(figures: Figures, name: str, clients: int, stream: bool, q: int) -> float | None:
    mine, direct = figures[name][clients][stream], figures[DIRECT][clients][stream]
    if not mine.ms or not direct.ms or mine.errors:
        return None
    return percentile(mine.ms, q) - percentile(direct.ms, q)


def _added(figures: Figures, name: str | None, clients: int, stream: bool, q: int) -> str:
    if name is None:
        return "—"
    mine = figures[name][clients][stream]
    if not mine.ms:
        return f"failed: {mine.first_error[:80]}"
    added = percentile(mine.ms, q) - percentile(figures[DIRECT][clients][stream].ms, q)
    return f"{added:+.2f} ms" + (f" ({mine.errors} errors)" if mine.errors else "")


def _cpu(by_mode: dict[bool, Sample]) -> str:
    calls = sum(len(s.ms) + s.errors for s in by_mode.values())
    return f"{sum(s.cpu_ms for s in by_mode.values()) / max(calls, 1):.2f} ms"


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"
