"""`manage.py bench_graph`: the graph page (traces/views/graph.py) of synthetic runs of growing
size; prints each size's time and the ratio to the smallest, beside the goal. A long run's
graph comes from its stored aggregate (traces/graph_summary), summed once as an import would
(its time printed too). Runs are made of the bench_traces mix (plans, llm calls, thoughts,
tools) and deleted afterwards unless --keep; --reuse measures runs kept by bench_traces --keep
(a million steps take minutes to make)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.management.base import BaseCommand, CommandError
from django.test import Client
from django.urls import reverse

from traces import graph_summary
from traces.graph_query import summarize
from traces.management.commands.bench_traces import _goal, _host, iter_synthetic_steps
from traces.models import Run, RunGraph, Step

GOAL_MS, GOAL_RATIO = 300.0, 2.0  # a long run's first view, and its ratio to the smallest


class Command(BaseCommand):
    help = "Benchmark the graph of a run on synthetic runs; print figures."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--sizes", default="1000,100000",
                            help="Steps per generated run (comma-separated)")
        parser.add_argument("--keep", action="store_true", help="Keep the generated runs")
        parser.add_argument("--reuse", action="store_true",
                            help="Measure bench_traces' kept runs of these sizes (--keep)")

    def handle(self, *args: Any, sizes: str, keep: bool, reuse: bool = False,
               **options: Any) -> None:
        try:
            counts = [int(s) for s in sizes.split(",") if s]
        except ValueError:
            raise CommandError("--sizes takes integers, e.g. 1000,100000") from None
        user, created = get_user_model().objects.get_or_create(username="bench")
        made: list[int] = []
        figures: list[tuple[int, float, float, float]] = []
        try:
            for n in counts:
                run = (reuse and self._kept(user, n)) or self._generate(user, n, made)
                if graph_summary.summed(run):  # as an import does once it has written the run
                    RunGraph.objects.filter(run=run).delete()
                    started = time.perf_counter()
                    summarize(run)
                    self.stdout.write(f"  graph summed in {time.perf_counter() - started:.1f} s")
                url = reverse("run_graph", args=[run.pk])
                self._get(user, url)  # warm-up: templates
                page = min(self._first(user, url) for _ in range(3))
                kept = min(self._get(user, url) for _ in range(3))
                step = min(self._get(user, reverse("run_graph_step", args=[run.pk, n // 2]))
                           for _ in range(3))
                figures.append((n, page, kept, step))
                self.stdout.write(f"  graph page {page * 1000:.0f} ms (again, kept: "
                                  f"{kept * 1000:.0f} ms), a step's place {step * 1000:.1f} ms")
        finally:
            if not keep:
                Run.objects.filter(pk__in=made).delete()
                if created:
                    user.delete()
        self._report(figures)

    def _kept(self, user: Any, n: int) -> Run | None:
        found = Run.objects.filter(user=user, input=f"bench question ({n} steps)",
                                   step_count=n).last()
        if found:
            self.stdout.write(f"measuring the kept run {found.pk} of {n:,} steps")
        return found

    def _generate(self, user: Any, n: int, made: list[int]) -> Run:
        self.stdout.write(f"generating a run of {n:,} steps…")
        run = Run.objects.create(user=user, agent_name="bench", paradigm="react",
                                 input=f"bench question ({n} steps)", status="succeeded",
                                 step_count=n,
                                 started_at=datetime.now(tz=UTC))
        made.append(run.pk)
        Step.objects.bulk_create((Step.from_record(run.pk, s) for s in iter_synthetic_steps(n)),
                                 batch_size=2000)
        return run

    def _report(self, figures: list[tuple[int, float, float, float]]) -> None:
        base = figures[0][1] if figures else 1.0
        self.stdout.write("\n| steps | graph page, first view (ms) | × smallest | again, kept "
                          "(ms) | step's place (ms) |")
        self.stdout.write("| ---: | ---: | ---: | ---: | ---: |")
        for n, page, kept, step in figures:
            self.stdout.write(f"| {n:,} | {page * 1000:.0f} | {page / base:.1f} | "
                              f"{kept * 1000:.0f} | {step * 1000:.1f} |")
        n, page, _kept, _step = max(figures) if len(figures) > 1 else (0, 0.0, 0.0, 0.0)
        self.stdout.write("Goals")
        self.stdout.write(_goal(
            f"the longest run's graph, first view < {GOAL_MS:g} ms and < {GOAL_RATIO:g}× the "
            f"smallest's", n and f"{n:,} steps: {page * 1000:.0f} ms, {page / base:.1f}×",
            page * 1000 < GOAL_MS and page / base < GOAL_RATIO))

    def _first(self, user: Any, url: str) -> float:
        """A first view: the finished run's kept groups forgotten."""
        cache.clear()
        return self._get(user, url)

    def _get(self, user: Any, url: str) -> float:
        client = Client(SERVER_NAME=_host())
        client.force_login(user)
        started = time.perf_counter()
        response = client.get(url)
        if response.status_code != 200:
            raise CommandError(f"GET {url} answered {response.status_code}")
        return time.perf_counter() - started
