"""`manage.py bench_hostile`: what hostile input costs the server, as printed figures
(docs/SECURITY.md). Run it in a throw-away state folder: it migrates and imports there.

- a catastrophic regex: Python's own `re` (what a scorer used to run on the event loop) against
  `agentlab.paradigms.user_regex` (the `regex` package, a time limit, off the loop);
- an SQL memory bomb through the SQL tool: time and the process's peak memory;
- a large bundle import: how long another writer waits for SQLite's write lock meanwhile.
"""

from __future__ import annotations

import asyncio
import re
import statistics
import time
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import connection

from agentlab.bench.lock_probe import OtherWriter
from agentlab.paradigms import user_regex
from agentlab.tools.builtin import business_db
from agentlab.tools.executor import ToolExecutor
from agentlab.tools.registry import builtin_tools
from traces.bundle import export_bundle, import_bundle
from traces.models import Run, Step

BOMB = r"(a+)+$"
SQL_BOMB = "SELECT hex(zeroblob(400000000))"
BENCH_USER = "bench-hostile"


def bundle_of(user: Any, n: int) -> dict[str, Any]:
    """A valid bundle of `n` llm-sized steps (~1.1 KB each), from a one-step run it deletes."""
    run = Run.objects.create(user=user, input="How big?", status="succeeded", step_count=1)
    Step.objects.create(run=run, seq=1, kind="llm", text="x", started_at=run.created)
    data = export_bundle(run)
    run.delete()
    one = data["steps"][0]
    data["steps"] = [{**one, "seq": i, "text": "x" * 400,
                      "input": {"messages": [{"role": "user", "content": "y" * 400}]}}
                     for i in range(1, n + 1)]
    data["run"]["step_count"] = n
    return data


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Command(BaseCommand):
    help = "What a regex bomb, an SQL memory bomb and a big bundle import cost the server."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--steps", type=int, default=20_000,
                            help="steps of the imported bundle (default 20,000: ~22 MB)")
        parser.add_argument("--re-length", type=int, default=24,
                            help="subject length for Python's re (each +1 doubles its time)")

    def handle(self, *args: Any, steps: int, re_length: int, **options: Any) -> None:
        call_command("migrate", verbosity=0)
        self.regex_figures(re_length)
        self.sql_figures()
        self.import_figures(steps)

    def line(self, what: str, figure: str) -> None:
        self.stdout.write(f"  {what:<58} {figure}")

    def regex_figures(self, n: int) -> None:
        self.stdout.write(f"Regex {BOMB!r} on 'a' * n + '!':")
        subject = "a" * n + "!"
        started = time.perf_counter()
        re.search(BOMB, subject)
        self.line(f"Python's re, n={n} (blocks the event loop)",
                  f"{time.perf_counter() - started:.2f} s")
        started = time.perf_counter()
        try:
            user_regex.search(BOMB, "a" * 26 + "!")
            outcome = "answered"
        except user_regex.UnsafePattern:
            outcome = "stopped"
        self.line("user_regex, n=26 (off the loop, time-limited)",
                  f"{(time.perf_counter() - started) * 1000:.2f} ms, {outcome}")
        bomb = r"(a|aa)+$"  # exponential in the `regex` package too
        started = time.perf_counter()
        try:
            user_regex.search(bomb, "a" * 40 + "!")
            outcome = "answered"
        except user_regex.UnsafePattern:
            outcome = "stopped at the limit"
        self.line(f"user_regex, {bomb!r} on 'a' * 40 + '!'",
                  f"{time.perf_counter() - started:.2f} s, {outcome}")

    def sql_figures(self) -> None:
        self.stdout.write(f"SQL tool, {SQL_BOMB!r}:")
        business_db.ensure_business_db()
        before = peak_rss_mb()
        started = time.perf_counter()
        result = asyncio.run(ToolExecutor(builtin_tools()).run("sql_query", {"query": SQL_BOMB}))
        took = time.perf_counter() - started
        refused = "refused" if "Refused" in result.observation else "answered"
        self.line("time, outcome", f"{took:.2f} s, {refused}")
        self.line("peak memory of this process, before → after",
                  f"{before:,.0f} → {peak_rss_mb():,.0f} MB")

    def import_figures(self, n: int) -> None:
        self.stdout.write(f"Bundle import of {n:,} steps, another writer beside it:")
        user, _ = get_user_model().objects.get_or_create(username=BENCH_USER)
        data = bundle_of(user, n)
        if connection.vendor != "sqlite":  # PostgreSQL locks rows: no one else's write waits
            started = time.perf_counter()
            run = import_bundle(data, user=user)
            self.line("the import", f"{time.perf_counter() - started:.1f} s, run {run.pk} with "
                      f"{run.steps.count():,} steps")
            self.line("the other writer", f"not measured on {connection.vendor} (only SQLite "
                      "locks the whole database for a write)")
            run.delete()
            return
        with OtherWriter(connection.settings_dict["NAME"]) as other:
            started = time.perf_counter()
            run = import_bundle(data, user=user)
            took = time.perf_counter() - started
        waits, errors = other.waits, other.errors
        self.line("the import", f"{took:.1f} s, run {run.pk} with {run.steps.count():,} steps")
        self.line("the other writer's wait for the lock: median / max",
                  f"{statistics.median(waits) * 1000:.0f} / {max(waits) * 1000:.0f} ms")
        self.line("'database is locked' for the other writer", str(len(errors)))
        run.delete()
