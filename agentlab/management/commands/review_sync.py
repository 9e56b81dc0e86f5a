"""`manage.py review_sync [--every S]`: the review queues' rules add the new runs that match
them (agentlab/review/sync.py): one pass, or a pass every S seconds until stopped."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand

from agentlab.review.models import Rule
from agentlab.review.sync import run_pass


class Command(BaseCommand):
    help = "Add the new runs that review queues' rules match (one pass, or --every S)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--every", type=float, default=0,
                            help="Seconds between passes; without it, one pass.")

    def handle(self, *args: Any, every: float, **options: Any) -> None:
        while True:
            added = run_pass()
            for rule in Rule.objects.filter(pk__in=added).select_related("queue"):
                problem = f" — {rule.problem}" if rule.problem else ""
                self.stdout.write(f"{rule.queue.name}: {rule} +{added[rule.pk]}{problem}")
            self.stdout.write(f"{sum(added.values())} item(s) added by {len(added)} rule(s).")
            if every <= 0:
                return
            time.sleep(every)
