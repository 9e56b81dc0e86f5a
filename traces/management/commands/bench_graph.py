"""`manage.py bench_graph`: the graph page (traces/views/graph.py) of synthetic runs of growing
size, served from the database's aggregate; prints each size's time and the ratio to the
smallest. Runs are made of the bench_traces mix (plans, llm calls, thoughts, tools) and deleted
afterwards unless --keep."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.management.base import BaseCommand, CommandError
from django.test import Client
from django.urls import reverse

from traces.management.commands.bench_traces import _host, synthetic_steps
from traces.models import Run, Step


class Command(BaseCommand):
    help = "Benchmark the graph of a run on synthetic runs; print figures."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--sizes", default="1000,100000",
                            help="Steps per generated run (comma-separated)")
        parser.add_argument("--keep", action="store_true", help="Keep the generated runs")

    def handle(self, *args: Any, sizes: str, keep: bool, **options: Any) -> None:
        try:
            counts = [int(s) for s in sizes.split(",") if s]
        except ValueError:
            raise CommandError("--sizes takes integers, e.g. 1000,100000") from None
        user, created = get_user_model().objects.get_or_create(username="bench")
        made: list[int] = []
        figures: list[tuple[int, float, float, float]] = []
        try:
            for n in counts:
                self.stdout.write(f"generating a run of {n:,} steps…")
                run = Run.objects.create(user=user, agent_name="bench", paradigm="react",
                                         input="bench", status="succeeded", step_count=n,
                                         started_at=datetime.now(tz=UTC))
                made.append(run.pk)
                Step.objects.bulk_create((Step.from_record(run.pk, s)
                                          for s in synthetic_steps(n)), batch_size=2000)
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
        base = figures[0][1] if figures else 1.0
        self.stdout.write("\n| steps | graph page, first view (ms) | × smallest | again, kept "
                          "(ms) | step's place (ms) |")
        self.stdout.write("| ---: | ---: | ---: | ---: | ---: |")
        for n, page, kept, step in figures:
            self.stdout.write(f"| {n:,} | {page * 1000:.0f} | {page / base:.1f} | "
                              f"{kept * 1000:.0f} | {step * 1000:.1f} |")

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
