"""Putting runs into a queue: the runs a filter keeps (one at a time, or paired by question
in pairwise mode), a pair from the diff page, and what a rule adds as runs finish.

Counts are bounded before the work that grows with them: a request adds at most MAX_ADD
items, a queue holds at most MAX_ITEMS. An item already there is not added again (the
database's unique constraints say so, so two processes filling at once are safe)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db.models import QuerySet

from agentlab.review.models import Item, Queue, Rule
from agentlab.review.pairing import RunFacts, pairs, question_key
from traces.models import Run
from traces.schema import FINISHED_STATUSES

MAX_ADD = 1000  # items one request (or one rule's pass) adds
MAX_ITEMS = 20_000  # items one queue holds
FACTS = ("pk", "input", "agent_name", "parent_run_id")


class FillError(ValueError):
    """Why nothing was added; a sentence for the page."""


def room(queue: Queue) -> int:
    return max(0, min(MAX_ADD, MAX_ITEMS - queue.items.count()))


def add(queue: Queue, targets: Iterable[tuple[int, int | None]], added_by: Any,
        rule: Rule | None = None) -> int:
    """Add the runs (run, None) or pairs (a, b) not in the queue yet, up to its room; how many
    were added."""
    space = room(queue)
    wanted = list(dict.fromkeys(targets))[:MAX_ADD * 2]
    had = _existing(queue, wanted)
    new = [Item(queue=queue, run_id=a, run_b_id=b, added_by=added_by, rule=rule)
           for a, b in wanted if (a, b) not in had][:space]
    before = queue.items.count()
    Item.objects.bulk_create(new, ignore_conflicts=True)
    return queue.items.count() - before


Target = tuple[int, int | None]  # a run (run, None) or a pair (a, b)


def _existing(queue: Queue, wanted: Sequence[Target]) -> set[Target]:
    runs = {a for a, _b in wanted}
    return set(queue.items.filter(run_id__in=runs).values_list("run_id", "run_b_id"))


def from_runs(queue: Queue, runs: QuerySet[Run], added_by: Any) -> tuple[int, int]:
    """The finished runs of `runs` into `queue` (pairwise: paired by question among them);
    (added, matched). A run still going is left out: it has no answer to review yet."""
    finished = runs.filter(status__in=FINISHED_STATUSES)
    facts = [RunFacts(r["pk"], r["input"], r["agent_name"], r["parent_run_id"])
             for r in finished.values(*FACTS)[:MAX_ADD + 1]]
    if len(facts) > MAX_ADD:
        raise FillError(f"The filter keeps more than {MAX_ADD:,} finished runs: narrow it "
                        "(dates, an agent, a status) or use a rule with a sampling rate.")
    if queue.pairwise:
        facts = _with_origins(facts, added_by)
        targets: list[tuple[int, int | None]] = list(pairs(facts))
    else:
        targets = [(f.pk, None) for f in facts]
    return add(queue, targets, added_by), len(targets)


def _with_origins(facts: list[RunFacts], owner: Any) -> list[RunFacts]:
    """A fork pairs with its origin where the owner may see the origin (whether or not the
    filter keeps it); otherwise it is paired by question like any run."""
    parents = {f.parent for f in facts if f.parent}
    visible = set(Run.objects.visible_to(owner).filter(pk__in=parents, status__in=FINISHED_STATUSES)
                  .values_list("pk", flat=True))
    return [f if f.parent is None or f.parent in visible
            else RunFacts(f.pk, f.question, f.agent, None) for f in facts]


def pair(queue: Queue, a: Run, b: Run, added_by: Any) -> int:
    """Two runs (the diff page's) as one pairwise item, the earlier as A."""
    if not queue.pairwise:
        raise FillError(f"“{queue.name}” reviews one run at a time: choose a pairwise queue.")
    if a.pk == b.pk:
        raise FillError("Choose two different runs.")
    first, second = sorted((a.pk, b.pk))
    return add(queue, [(first, second)], added_by)


def partner(owner: Any, run: Run) -> int | None:
    """The run a new run is compared with in a pairwise rule: its origin, else the latest
    earlier finished run of the same question by another agent (among the owner's)."""
    visible = Run.objects.visible_to(owner)
    if run.parent_run_id and visible.filter(pk=run.parent_run_id).exists():
        return run.parent_run_id
    candidates = (visible.filter(pk__lt=run.pk, input=run.input, status__in=FINISHED_STATUSES)
                  .exclude(agent_name=run.agent_name).order_by("-pk")
                  .values_list("pk", "input")[:50])
    key = question_key(run.input)
    return next((pk for pk, text in candidates if question_key(text) == key), None)
