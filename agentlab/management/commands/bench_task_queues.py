"""`manage.py bench_task_queues [QUEUE …]`: the finalists for running runs on workers (issue 20),
measured on real PostgreSQL, Redis and worker processes (agentlab/bench/queue_runs.py); the
decision and these figures are in docs/ARCHITECTURE.md "Runs on workers: the task queue"."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agentlab.bench import queue_runs, task_queues


class Command(BaseCommand):
    help = "Measure the task queues that could run runs on workers, side by side."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("queues", nargs="*", metavar="QUEUE",
                            help=f"task queues to measure: {', '.join(task_queues.QUEUES)} "
                                 "(default: all)")

    def handle(self, *args: Any, **options: Any) -> None:
        names = options["queues"] or list(task_queues.QUEUES)
        if unknown := [n for n in names if n not in task_queues.QUEUES]:
            raise CommandError(f"no task queue {', '.join(unknown)}: choose from "
                               f"{', '.join(task_queues.QUEUES)}")
        results = queue_runs.measure(names, lambda line: self.stdout.write(f"… {line}"))
        self.stdout.write("")
        for line in queue_runs.table(results):
            self.stdout.write(line)
