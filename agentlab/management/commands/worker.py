"""`manage.py worker`: a worker process of the scale profile (docs/ARCHITECTURE.md "Runs on
workers"): executes queued runs as procrastinate jobs, many at once on one event loop, until
SIGTERM or Ctrl-C; then it takes no new run and finishes the ones it holds."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Execute queued runs (AGENTLAB_RUNS_ON=workers, PostgreSQL and Redis) until SIGTERM."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--concurrency", type=int, default=100,
                            help="Runs executed at once by this process (default 100)")

    def handle(self, *args: Any, concurrency: int, **options: Any) -> None:
        if concurrency < 1:
            raise CommandError("--concurrency must be at least 1")
        if not settings.CHANNEL_LAYERS["default"]["BACKEND"].startswith("channels_redis"):
            raise CommandError("a worker needs REDIS_URL: its runs' steps and controls reach "
                               "the web processes through the Redis channel layer")
        from agentlab.workers.app import conninfo
        from agentlab.workers.process import serve

        try:
            conninfo()
        except Exception as exc:
            raise CommandError(str(exc)) from None
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
        from agentlab.monitors.background import ensure_running

        ensure_running()  # live scorers pass where runs execute (docs/FEEDBACK.md)
        from agentlab.process_tuning import tune_worker_process

        tune_worker_process()  # the TLS trust store loaded; collections walk only the runs
        self.stdout.write(f"worker: up to {concurrency} runs at once; takeover after "
                          f"{settings.AGENTLAB_TAKEOVER_S} s of silence; SIGTERM finishes "
                          f"the runs held (at most {settings.AGENTLAB_WORKER_GRACE_S} s)")
        self.stdout.flush()
        asyncio.run(serve(concurrency))
