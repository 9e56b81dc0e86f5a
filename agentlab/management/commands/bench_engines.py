"""`manage.py bench_engines [ENGINE …]`: the finalists for running runs on workers (issue 20),
measured on real PostgreSQL, Redis and worker processes (agentlab/bench/engine_runs.py); the
decision and these figures are in docs/ARCHITECTURE.md "Runs on workers: the engine"."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agentlab.bench import engine_runs, engines


class Command(BaseCommand):
    help = "Measure the task engines that could run runs on workers, side by side."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("engines", nargs="*", metavar="ENGINE",
                            help=f"engines to measure: {', '.join(engines.ENGINES)} (default: all)")

    def handle(self, *args: Any, **options: Any) -> None:
        names = options["engines"] or list(engines.ENGINES)
        if unknown := [n for n in names if n not in engines.ENGINES]:
            raise CommandError(f"no engine {', '.join(unknown)}: choose from "
                               f"{', '.join(engines.ENGINES)}")
        results = engine_runs.measure(names, lambda line: self.stdout.write(f"… {line}"))
        self.stdout.write("")
        for line in engine_runs.table(results):
            self.stdout.write(line)
