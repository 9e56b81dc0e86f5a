"""The rules' pass: each enabled rule adds the new runs that match its filter (a sample of
them) to its queue, as they finish, whatever their source (run here, imported, received over
OTLP: every one is a Run row).

Where it runs (docs/REVIEW.md "Rules"): never on a web server's event loop. Each web process
starts a daemon thread at its first request that runs a pass every AGENTLAB_REVIEW_SYNC_S
seconds (0: none); `manage.py review_sync` runs one pass, or passes for ever with --every,
for deployments that want it elsewhere. Passes in several processes at once are safe: an item
is added once (the unique constraints), the rest is read-only.

A rule looks at finished runs made after it (id above `Rule.after`) that are not in its
queue yet, on every pass: a run may match later than it finished (thumbs down given the next
day). What a pass reads grows with those runs; what it adds is bounded (fill.MAX_ADD)."""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from agentlab.review import fill
from agentlab.review.filters import FilterError, runs_matching
from agentlab.review.models import Rule
from agentlab.review.sampling import sampled
from traces.models import Run
from traces.schema import FINISHED_STATUSES

log = logging.getLogger(__name__)
_STARTED: set[int] = set()  # pids whose thread runs (a forked child starts its own)
_LOCK = threading.Lock()


def new_runs(rule: Rule) -> list[Run]:
    """The finished runs after the rule's start that match its filter, are in its sample and
    are not in its queue yet; at most what the queue has room for."""
    queue = rule.queue
    space = fill.room(queue)
    if not space:
        return []
    runs = (runs_matching(queue.owner, rule.query)
            .filter(pk__gt=rule.after, status__in=FINISHED_STATUSES)
            .exclude(pk__in=queue.items.values("run_b" if queue.pairwise else "run")))
    kept = []
    for pk in runs.order_by("pk").values_list("pk", flat=True).iterator(chunk_size=2000):
        if sampled(pk, rule.percent):
            kept.append(pk)
            if len(kept) >= space:
                break
    return list(Run.objects.filter(pk__in=kept).only("pk", "input", "agent_name", "parent_run")
                .order_by("pk"))


def apply_rule(rule: Rule) -> int:
    """Add the rule's new runs to its queue (pairwise: each with its partner); how many."""
    queue = rule.queue
    runs = new_runs(rule)
    if queue.pairwise:
        targets = [(p, run.pk) for run in runs
                   if (p := fill.partner(queue.owner, run)) is not None]
    else:
        targets = [(run.pk, None) for run in runs]
    return fill.add(queue, targets, queue.owner, rule) if targets else 0


def run_pass() -> dict[int, int]:
    """One pass over every enabled rule: {rule id: items added}. A rule whose filter no longer
    holds (a feedback key deleted) says why on its queue's page and adds nothing."""
    added: dict[int, int] = {}
    for rule in Rule.objects.filter(enabled=True).select_related("queue__owner"):
        problem, count = "", 0
        try:
            count = apply_rule(rule)
        except (FilterError, fill.FillError) as exc:
            problem = str(exc)[:500]
        Rule.objects.filter(pk=rule.pk).update(checked=timezone.now(), problem=problem,
                                               added=rule.added + count)
        added[rule.pk] = count
    return added


class RulesThread(threading.Thread):
    """Passes every `every_s` seconds until stopped."""

    def __init__(self, every_s: float) -> None:
        super().__init__(name="review-rules", daemon=True)
        self.every_s, self.stopped, self.passes = every_s, threading.Event(), 0

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                run_pass()
            except Exception:  # the database is away: try again next time
                log.exception("the review rules' pass failed")
            finally:
                self.passes += 1
                close_old_connections()
            self.stopped.wait(self.every_s)

    def stop(self) -> None:
        self.stopped.set()


def start(every_s: float) -> RulesThread:
    thread = RulesThread(every_s)
    thread.start()
    return thread


def on_request_started(**_kwargs: Any) -> None:
    """A web process's first request starts its thread (request_started, agentlab.review.apps)."""
    every_s = settings.AGENTLAB_REVIEW_SYNC_S
    if every_s <= 0 or os.getpid() in _STARTED:
        return
    with _LOCK:
        if os.getpid() not in _STARTED:
            _STARTED.add(os.getpid())
            start(every_s)
