"""manage.py bench_ingest: how fast the OTLP receiver (POST /v1/traces) takes an agent's spans,
beside Arize Phoenix on the same machine with the same spans (the goals: issue 39,
"Performance"; docs/ARCHITECTURE.md, the benchmarks table).

Both receivers run for real on loopback with throw-away state: one daphne on its own SQLite
file (agentlab/bench/ingest.py) and Phoenix in its own virtualenv. Both get the same spans
(agentlab/bench/otlp_payload.py: OpenInference agent traces, the root AGENT span last),
encoded by the OpenTelemetry SDK's OTLP encoder and sent as its exporter sends them: protobuf
requests of 512 spans, one after another. The figures:

1. spans/s until every span is queryable, for one 10,000-span trace and for 1,000 traces of 10
   spans (Agent Lab: the steps are rows and the runs finished; Phoenix: its API counts them all);
2. p95 from a span's request to its step's frame on a run page's WebSocket, at a steady 1,000
   spans/s (Agent Lab only: Phoenix has no live view; agentlab/bench/ingest_watch.py);
3. the receiver's RSS growth per 1,000 spans of a trace still open (no root span yet).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import asdict
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from agentlab.bench.cluster import child_env
from agentlab.bench.ingest import (
    PHOENIX_VERSION,
    AgentLab,
    Phoenix,
    Target,
    buffered,
    phoenix_python,
    throughput,
)
from agentlab.bench.otlp_payload import BATCH, agent_trace, agent_traces
from agentlab.bench.watch import percentile

GOAL_SPANS_PER_S = 5000
GOAL_P95_MS = 100.0
LATENCY_RATE = 1000
ONE, MANY = "one", "many"


class Command(BaseCommand):
    help = "OTLP ingest: spans/s until queryable, live latency, memory; beside Phoenix."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--spans", type=int, default=10_000,
                            help="spans of the one big trace (default 10000)")
        parser.add_argument("--traces", type=int, default=1000,
                            help="small traces (default 1000) …")
        parser.add_argument("--trace-spans", type=int, default=10,
                            help="… of this many spans each (default 10)")
        parser.add_argument("--buffered", type=int, default=2500,
                            help="spans of each of the two open traces whose memory is "
                                 "measured (default 2500)")
        parser.add_argument("--latency-spans", type=int, default=5000,
                            help="spans sent while a browser watches (default 5000)")
        parser.add_argument("--rate", type=float, default=LATENCY_RATE,
                            help="spans/s of the latency figure (default 1000)")
        parser.add_argument("--batch", type=int, default=BATCH,
                            help="spans per request (default 512, the SDK's)")
        parser.add_argument("--timeout", type=float, default=120,
                            help="seconds Agent Lab gets per figure (default 120)")
        parser.add_argument("--skip-phoenix", action="store_true",
                            help="measure Agent Lab only")
        parser.add_argument("--phoenix-timeout", type=float, default=300,
                            help="seconds Phoenix gets per figure (default 300)")
        parser.add_argument("--phoenix-python", default=str(phoenix_python()),
                            help="the Python of Phoenix's virtualenv "
                                 "(default: the one scripts/test makes)")
        parser.add_argument("--json", help="also write the figures to this file")
        parser.add_argument("--profile", action="store_true",
                            help="instead: CPU µs per span of the two throughput payloads "
                                 "through the receiver in this process, a socket watching "
                                 "(agentlab/bench/ingest_profile.py; a fresh AGENTLAB_VAR_DIR)")

    def handle(self, *args: Any, **opts: Any) -> None:
        sizes = ("spans", "traces", "trace_spans", "buffered", "latency_spans", "batch")
        if any(opts[k] < 1 for k in sizes) or opts["rate"] <= 0:
            raise CommandError("--spans, --traces, --trace-spans, --buffered, "
                               "--latency-spans, --batch and --rate need numbers ≥ 1")
        if opts["trace_spans"] < 2:
            raise CommandError("--trace-spans needs at least 2 (a root and a step)")
        if opts["profile"]:
            return self.profile(opts)
        python = Path(opts["phoenix_python"])
        if not opts["skip_phoenix"] and not python.exists():
            raise CommandError(f"no Phoenix at {python} (scripts/test makes its virtualenv; "
                               "or pass --phoenix-python, or --skip-phoenix)")
        self.say(f"payload: OpenInference agent traces, protobuf requests of {opts['batch']} "
                 "spans sent one after another (as OTLPSpanExporter behind a "
                 "BatchSpanProcessor)")
        figures: dict[str, dict[str, Any]] = {"agentlab": self.agentlab(opts)}
        if not opts["skip_phoenix"]:
            figures["phoenix"] = self.phoenix(python, opts)
        self.table(figures, opts)
        if opts["json"]:
            Path(opts["json"]).write_text(json.dumps(figures, indent=2, default=str))

    def profile(self, opts: dict[str, Any]) -> None:
        from agentlab.bench.ingest_profile import profile

        for fig in profile(opts["spans"], opts["traces"], opts["trace_spans"],
                           batch=opts["batch"]):
            watched = f", {fig.frames:,} step frames to a watcher" if fig.frames else ""
            self.say(f"{fig.what}: {fig.cpu_us_per_span:.0f} µs CPU per span "
                     f"({fig.cpu_s:.2f} s CPU, {fig.wall_s:.2f} s wall{watched})")

    # ------------------------------------------------------------------ the two receivers

    def agentlab(self, opts: dict[str, Any]) -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="agentlab-bench-ingest-") as tmp, \
                ExitStack() as stack:
            lab = AgentLab(Path(tmp))
            self.say("starting Agent Lab (migrate, a user and an ingest token, daphne) …")
            lab.start(stack, child_env(Path(tmp)))
            out = self.measure("Agent Lab", lab, opts["timeout"], opts)
            self.say(f"Agent Lab: watching a run at {opts['rate']:g} spans/s "
                     f"({opts['latency_spans']:,} spans) …")
            out["latency"] = self.latency(lab, opts)
            return out

    def phoenix(self, python: Path, opts: dict[str, Any]) -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="agentlab-bench-phoenix-") as tmp, \
                ExitStack() as stack:
            server = Phoenix(python, Path(tmp))
            self.say(f"starting Phoenix {PHOENIX_VERSION} …")
            server.start(stack)
            return self.measure("Phoenix", server, opts["phoenix_timeout"], opts, poll=0.5)

    def measure(self, name: str, target: Target, cap: float, opts: dict[str, Any],
                poll: float = 0.05) -> dict[str, Any]:
        rng = random.Random()
        self.say(f"{name}: warm-up (one 10-span trace, not measured) …")
        warm = throughput(target, [agent_trace(rng, "bench-warm-up", 10)], cap, poll)
        if warm.seconds is None:
            raise CommandError(f"{name} did not take a 10-span trace within {cap:g} s "
                               f"({warm.sent.first_error or 'no error answered'})")
        self.say(f"{name}: two open traces of {opts['buffered']:,} spans (memory) …")
        held = buffered(target, [agent_trace(rng, "bench-buffered", opts["buffered"], root=False)
                                 for _ in range(2)], cap, opts["batch"])
        for reading in held:
            self.say(f"  RSS {reading.rss_before_kb / 1024:.1f} → "
                     f"{reading.rss_after_kb / 1024:.1f} MiB"
                     + ("" if reading.held else " (not all of it queryable yet)"))
        out: dict[str, Any] = {"buffered": [
            {k: v for k, v in asdict(r).items() if k != "sent"}
            | {"kb_per_1000": r.kb_per_1000, "requests": r.sent.requests,
               "dropped": r.sent.dropped, "rejected": r.sent.rejected} for r in held]}
        for key, traces in ((ONE, lambda: [agent_trace(rng, "bench-one-trace", opts["spans"])]),
                            (MANY, lambda: agent_traces(rng, "bench-many-traces",
                                                        opts["traces"], opts["trace_spans"]))):
            batch = traces()
            self.say(f"{name}: {len(batch):,} trace(s) × {len(batch[0].spans):,} spans …")
            result = throughput(target, batch, cap, poll, opts["batch"])
            shown = (f"{result.seconds:.2f} s" if result.seconds is not None
                     else f"not within {cap:g} s")
            self.say(f"  requests answered in {result.answered_s:.2f} s; all queryable: {shown}"
                     f"; {result.sent.requests} requests, {result.sent.retries} retried, "
                     f"{result.sent.dropped} dropped, {result.sent.rejected} spans refused")
            if result.sent.first_error:
                self.say(f"  first refusal: {result.sent.first_error}")
            if isinstance(target, Phoenix) and result.seconds is not None:
                rest = target.rest_span_count(batch[0].project)
                self.say(f"  Phoenix's REST API returns {rest:,} of them")
            out[key] = asdict(result) | {"spans_per_s": result.spans_per_s, "cap_s": cap}
            out[key]["sent"].pop("starts")
        return out

    def latency(self, lab: AgentLab, opts: dict[str, Any]) -> dict[str, Any]:
        spec = {"port": lab.port, "cookie": lab.cookie, "token": lab.token,
                "database": str(lab.database), "project": "bench-live",
                "spans": opts["latency_spans"], "rate": opts["rate"], "batch": opts["batch"],
                "timeout": opts["timeout"]}
        limit = opts["latency_spans"] / opts["rate"] + opts["timeout"] + 120
        done = subprocess.run([sys.executable, "-m", "agentlab.bench.ingest_watch",
                               json.dumps(spec)], cwd=str(settings.BASE_DIR),
                              capture_output=True, text=True, timeout=limit)
        if done.returncode:
            raise CommandError(f"the latency run failed:\n{done.stderr[-2000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])

    # ------------------------------------------------------------------ the table

    def table(self, figures: dict[str, dict[str, Any]], opts: dict[str, Any]) -> None:
        lab, px = figures["agentlab"], figures.get("phoenix")
        anchor = f"Phoenix {PHOENIX_VERSION}"
        rows = [
            (f"spans/s until queryable: 1 trace × {opts['spans']:,} spans",
             f"≥ {GOAL_SPANS_PER_S:,}", _rate(lab[ONE]), _rate(px[ONE]) if px else "skipped"),
            (f"spans/s until queryable: {opts['traces']:,} traces × {opts['trace_spans']} "
             "spans", f"≥ {GOAL_SPANS_PER_S:,}", _rate(lab[MANY]),
             _rate(px[MANY]) if px else "skipped"),
            (f"p95 request → browser at {opts['rate']:,.0f} spans/s", f"< {GOAL_P95_MS:g} ms",
             _p95(lab["latency"]), "no live view" if px else "skipped"),
            (f"memory per 1,000 spans buffered (2nd open trace of {opts['buffered']:,})", "—",
             _memory(lab["buffered"]), _memory(px["buffered"]) if px else "skipped"),
        ]
        head = ("figure", "goal", "Agent Lab", anchor)
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
        self.say("")
        self.say("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
        self.say("  ".join("-" * w for w in widths))
        for row in rows:
            self.say("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
        self.say("")
        self.goals(lab, opts)
        self.details(lab)

    def goals(self, lab: dict[str, Any], opts: dict[str, Any]) -> None:
        for key, what in ((ONE, f"1 trace × {opts['spans']:,}"),
                          (MANY, f"{opts['traces']:,} traces × {opts['trace_spans']}")):
            rate = lab[key]["spans_per_s"]
            met = "met" if rate and rate >= GOAL_SPANS_PER_S else "not met"
            self.say(f"goal ≥ {GOAL_SPANS_PER_S:,} spans/s ({what}): {met} ({_rate(lab[key])})")
        lat = lab["latency"]
        p95 = percentile(lat["arrival_ms"], 95)
        complete = lat["seen"] == lat["spans"] and lat["arrival_ms"]
        met = "met" if complete and p95 < GOAL_P95_MS else "not met"
        self.say(f"goal p95 < {GOAL_P95_MS:g} ms at {opts['rate']:,.0f} spans/s: {met} "
                 f"({_p95(lat)})")

    def details(self, lab: dict[str, Any]) -> None:
        lat = lab["latency"]
        v = lat["arrival_ms"]
        self.say(f"latency: {lat['seen']:,} of {lat['spans']:,} spans reached the browser "
                 f"({lat['at_final']:,} of them by the run's final frame: they came with the "
                 f"root span), sent at {lat['rate']:,.0f} spans/s in {lat['requests']} "
                 "requests; request → "
                 f"frame p50 {percentile(v, 50):.1f} / p95 {percentile(v, 95):.1f} / p99 "
                 f"{percentile(v, 99):.1f} / max {max(v, default=0):.1f} ms")
        if lat["step_ms"]:
            s = lat["step_ms"]
            self.say(f"  the {len(s):,} spans shown by their own step frame (the run still "
                     f"going): p50 {percentile(s, 50):.1f} / p95 {percentile(s, 95):.1f} ms")
        if lat["recorded_ms"]:
            r = lat["recorded_ms"]
            self.say(f"  from the recorder's stamp (recorded_at → frame): p50 "
                     f"{percentile(r, 50):.1f} / p95 {percentile(r, 95):.1f} ms")
        if lat["final_ms"] is not None:
            self.say(f"  the root span's request → the run's final frame: "
                     f"{lat['final_ms']:.1f} ms")
        if lat["first_error"]:
            self.say(f"  first error: {lat['first_error'][:300]}")
        self.say("Both receivers share this machine's cores with this bench (it encodes every "
                 "request before the clock starts).")

    def say(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()


def _rate(figure: dict[str, Any]) -> str:
    if figure["spans_per_s"] is None:
        return f"> {figure['cap_s']:g} s, under {figure['spans'] / figure['cap_s']:,.0f}"
    return f"{figure['spans_per_s']:,.0f} ({figure['seconds']:.2f} s)"


def _p95(lat: dict[str, Any]) -> str:
    if not lat["arrival_ms"]:
        return "no frames"
    text = f"{percentile(lat['arrival_ms'], 95):.1f} ms"
    return text if lat["seen"] == lat["spans"] else f"{text} ({lat['seen']} of {lat['spans']})"


def _memory(held: list[dict[str, Any]]) -> str:
    """The second open trace's growth (what more spans cost), the first's beside it."""
    first, then = held
    text = f"{then['kb_per_1000'] / 1024:.2f} MiB (1st: {first['kb_per_1000'] / 1024:.2f})"
    return text + ("" if first["held"] and then["held"] else " (not all held)")
