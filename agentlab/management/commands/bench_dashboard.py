"""`manage.py bench_dashboard`: how fast /dashboard/ is over many recorded steps, as printed
figures (the goal: the page stays fast with 100,000 recorded steps).

It records synthetic finished runs of every paradigm (their roles, tool calls with some errors,
format errors, reflections; created over the last 30 days) under a `bench-dashboard` user in
the current database, calls the page through django.test.Client as that user (server time
only: no network, no browser), counts its SQL queries, and deletes the user and its runs at
the end unless --keep.
"""

from __future__ import annotations

import random
import statistics
import time
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from traces.management.commands.bench_traces import _host
from traces.models import Run, Step

BENCH_USER = "bench-dashboard"
GOAL_S = 1.0
# paradigm: (llm roles, most frequent first), as the paradigms record them
PARADIGMS = {
    "react": ("agent",),
    "plan_execute": ("executor", "executor", "planner", "replanner", "solver"),
    "reflexion": ("actor", "actor", "evaluator", "reflector"),
    "rewoo": ("worker", "planner", "solver"),
    "self_ask": ("agent", "answerer"),
    "lats": ("agent", "agent", "evaluator", "reflector", "solver"),
    "multi_agent": ("optimist", "skeptic", "judge"),
}
MODELS = ("bench-small", "bench-large", "bench-remote")
TOOLS = ("calculator", "get_weather", "sql_query", "search_docs", "read_file", "get_air_quality")
TOOL_ERRORS = (("validation", "Error: invalid arguments for {}: 'expression' is required"),
               ("timeout", "Error: tool {} timed out after 30 s"),
               ("exception", "Error: {} raised ValueError: no such city"))
STATUSES = (("succeeded", 70), ("failed", 12), ("timed_out", 6), ("cancelled", 5),
            ("interrupted", 2))
PAGES = (("30d", "agent"), ("30d", "paradigm"), ("30d", "model"), ("7d", "agent"),
         ("all", "agent"))
BATCH_RUNS = 500
PROMPT = ("You are a careful agent. Think step by step, call a tool when you need a fact, and "
          "answer in one sentence once you know. " * 8)


class Command(BaseCommand):
    help = "Time /dashboard/ over synthetic recorded runs; print steps, runs, time and queries."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--steps", type=int, default=100_000, help="Steps in all")
        parser.add_argument("--runs", type=int, default=4_000, help="Runs they belong to")
        parser.add_argument("--repeat", type=int, default=3, help="Timed calls per page")
        parser.add_argument("--keep", action="store_true", help="Keep the generated runs")

    def handle(self, *args: Any, steps: int, runs: int, repeat: int, keep: bool,
               **options: Any) -> None:
        if runs < 1 or steps < 2 * runs or repeat < 1:
            raise CommandError("--runs ≥ 1, --steps ≥ 2 × --runs and --repeat ≥ 1, please")
        users = get_user_model().objects
        if users.filter(username=BENCH_USER).exists():
            raise CommandError(f"a user named {BENCH_USER!r} exists already (a kept bench?); "
                               "delete it first")
        user = users.create_user(username=BENCH_USER)
        try:
            started = time.perf_counter()
            made_steps = self.generate(user, runs, steps)
            self.stdout.write(f"generated {made_steps:,} steps over {runs:,} runs in "
                              f"{time.perf_counter() - started:.1f} s")
            results = [self.measure(user, p, g, repeat) for p, g in PAGES]
        finally:
            if not keep:
                self.stdout.write("deleting the generated runs…")
                ids = list(Run.objects.filter(user=user).values_list("pk", flat=True))
                for start in range(0, len(ids), BATCH_RUNS):
                    Run.objects.filter(pk__in=ids[start:start + BATCH_RUNS]).delete()
                user.delete()
        self.report(made_steps, runs, results)

    # ------------------------------------------------------------------ data

    def generate(self, user: Any, runs: int, steps: int) -> int:
        rng = random.Random(8)
        counts = step_counts(rng, runs, steps)
        now, made = timezone.now(), 0
        for start in range(0, runs, BATCH_RUNS):
            batch = counts[start:start + BATCH_RUNS]
            plans = [synthetic_run(rng, start + i, n) for i, n in enumerate(batch)]
            rows = Run.objects.bulk_create([Run(user=user, **fields) for fields, _ in plans])
            for i, row in enumerate(rows):  # created is auto_now_add: spread it afterwards
                row.created = now - timedelta(hours=((start + i) * 7919) % (30 * 24),
                                              minutes=(start + i) % 60)
            Run.objects.bulk_update(rows, ["created"], batch_size=BATCH_RUNS)
            step_rows = [Step(run=row, started_at=row.created, **s)
                         for row, (_, specs) in zip(rows, plans, strict=True) for s in specs]
            Step.objects.bulk_create(step_rows, batch_size=2_000)
            made += len(step_rows)
            self.stdout.write(f"  {start + len(batch):,} / {runs:,} runs, {made:,} steps")
        return made

    # ------------------------------------------------------------------ measure

    def measure(self, user: Any, period: str, group: str, repeat: int) -> dict[str, Any]:
        url = f"/dashboard/?period={period}&group={group}"
        client = Client(SERVER_NAME=_host(), raise_request_exception=True)
        client.force_login(user)
        client.get(url)  # warm-up: templates, imports, the database's caches
        times, cpu = [], []
        for _ in range(repeat):
            with CaptureQueriesContext(connection) as queries:
                started, cpu_started = time.perf_counter(), time.process_time()
                response = client.get(url)
                times.append(time.perf_counter() - started)
                # SQLite runs in this process: CPU time is the page's cost on a busy machine.
                cpu.append(time.process_time() - cpu_started)
            if response.status_code != 200:
                raise CommandError(f"GET {url} answered {response.status_code}")
        self.stdout.write(f"  {url}: {statistics.median(times) * 1000:.0f} ms")
        return {"url": url, "median_s": statistics.median(times), "max_s": max(times),
                "cpu_s": statistics.median(cpu),
                "queries": len(queries), "size": len(response.content)}

    def report(self, steps: int, runs: int, results: list[dict[str, Any]]) -> None:
        out = self.stdout.write
        out(f"\nDashboard with {steps:,} steps over {runs:,} runs (user {BENCH_USER})")
        out(f"  {'page':<40} {'median':>8} {'max':>8} {'cpu':>8} {'queries':>8} {'size':>9}")
        for r in results:
            out(f"  {r['url']:<40} {r['median_s'] * 1000:>5.0f} ms {r['max_s'] * 1000:>5.0f} ms"
                f" {r['cpu_s'] * 1000:>5.0f} ms {r['queries']:>8} {r['size'] / 1024:>6.1f} KB")
        worst = max(r["median_s"] for r in results)
        out(f"Goal: every page < {GOAL_S:g} s at {steps:,} steps: {worst:.2f} s — "
            f"{'met' if worst < GOAL_S else 'NOT met'}")


def step_counts(rng: random.Random, runs: int, steps: int) -> list[int]:
    """`runs` numbers ≥ 2 that add up to `steps`, spread around the mean (long tails too)."""
    mean = steps / runs
    counts = [max(2, round(rng.triangular(2, mean * 2.5, mean * 0.6))) for _ in range(runs)]
    diff = steps - sum(counts)
    i = 0
    while diff:
        step = 1 if diff > 0 else -1
        if counts[i % runs] + step >= 2:
            counts[i % runs] += step
            diff -= step
        i += 1
    return counts


def synthetic_run(rng: random.Random, i: int, n: int) -> tuple[dict[str, Any], list[dict]]:
    """(Run fields, Step fields) of one finished run of `n` steps whose totals match them."""
    paradigm = list(PARADIGMS)[i % len(PARADIGMS)]
    model = MODELS[(i // len(PARADIGMS)) % len(MODELS)]
    roles = PARADIGMS[paradigm]
    specs: list[dict[str, Any]] = []
    for seq in range(1, n):
        kind = rng.choices(("llm", "tool", "thought", "plan"), (45, 35, 15, 5))[0]
        spec: dict[str, Any] = {"seq": seq, "kind": kind, "role": roles[0], "status": "ok"}
        if kind == "llm":
            spec |= {"role": rng.choice(roles), "name": model,
                     "duration_ms": rng.lognormvariate(6.5, 0.8),
                     "tokens_in": rng.randint(200, 3000), "tokens_out": rng.randint(5, 300)}
            spec["cost_usd"] = (spec["tokens_in"] + 4 * spec["tokens_out"]) / 1e6
            # Real llm steps carry their whole request: the rows are wide, as in a real trace.
            spec["input"] = {"messages": [{"role": "system", "content": PROMPT},
                                          {"role": "user", "content": f"question {i}"}]}
            spec["text"] = PROMPT[:rng.randint(20, 300)]
        elif kind == "tool":
            tool = rng.choice(TOOLS)
            spec |= {"name": tool, "duration_ms": rng.lognormvariate(4, 1.2), "text": "ok",
                     "output": {"tool": tool, "ok": True, "observation": "ok"}}
            if rng.random() < 0.15:
                error_type, text = rng.choice(TOOL_ERRORS)
                spec |= {"status": "error", "text": text.format(tool),
                         "output": {"tool": tool, "ok": False, "error_type": error_type,
                                    "error": text.format(tool)}}
        else:
            spec["text"] = "bench"
        specs.append(spec)
    specs.append({"seq": n, "kind": "final", "role": roles[0], "status": "ok", "text": "42"})
    status = rng.choices([s for s, _ in STATUSES], [w for _, w in STATUSES])[0]
    llm = [s for s in specs if s["kind"] == "llm"]
    fields = {
        "agent_name": f"Bench {paradigm}", "paradigm": paradigm, "status": status,
        "input": f"bench question {i}", "final_answer": "42" if status == "succeeded" else "",
        "agent_snapshot": {"profiles": {"default": {"name": model.title(), "model": model}}},
        "step_count": n, "llm_calls": len(llm),
        "tool_calls": sum(1 for s in specs if s["kind"] == "tool"),
        "tokens_in": sum(s["tokens_in"] for s in llm),
        "tokens_out": sum(s["tokens_out"] for s in llm),
        "cost_usd": sum(s["cost_usd"] for s in llm),
        "wall_ms": sum(s.get("duration_ms", 0) for s in specs),
        "format_errors": rng.choice((0,) * 8 + (1, 2)),
        "reflections": rng.randint(1, 3) if paradigm in ("reflexion", "lats") else 0,
    }
    return fields, specs
