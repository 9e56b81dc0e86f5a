"""A reviewer's answers, written and read: the rubric's values are their feedback on the run
(agentlab.feedback.record, so they show on the run page, in the runs list's filter and in
Phoenix like any feedback); a pairwise choice is a Review row and feedback "pairwise" on both
runs (better / worse / tie, why in the note). Progress and "who said what" are read here."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from agentlab.feedback import record
from agentlab.feedback.models import RUN, Feedback, FeedbackKey
from agentlab.feedback.values import PAIRWISE, THUMBS, Value, thumb
from agentlab.review import agreement
from agentlab.review.models import DONE, SKIPPED, Item, Queue, Review

PAIR_VALUES = {"a": ((1.0, "better"), (0.0, "worse")), "b": ((0.0, "worse"), (1.0, "better")),
               "tie": ((0.5, "tie"), (0.5, "tie"))}
CHOICE_WORDS = {"a": "A", "b": "B", "tie": "tie"}


def rubric(queue: Queue) -> list[FeedbackKey]:
    return list(queue.keys.order_by("position", "name"))


def mine(item: Item, reviewer: Any) -> dict[str, Feedback]:
    """What the reviewer gave the item's run before, by key name."""
    return {r.name: r for r in Feedback.objects.filter(run_id=item.run_id, seq=RUN,
                                                       author=reviewer).select_related("key")}


def _mark(item: Item, reviewer: Any, status: str, **fields: Any) -> Review:
    now = timezone.now()
    review, created = Review.objects.get_or_create(
        item=item, reviewer=reviewer,
        defaults={"status": status, "created": now, "updated": now, **fields})
    if not created:
        review.status, review.updated = status, now
        for name, value in fields.items():
            setattr(review, name, value)
        review.save()
    return review


@transaction.atomic
def answer(item: Item, reviewer: Any, keys: Sequence[FeedbackKey], data: dict[str, Any],
           before: dict[str, Feedback]) -> Review:
    """The rubric's values (`data`, a checked AnswerForm's) as the reviewer's feedback on the
    run; a value left blank takes back one given before."""
    run = item.run
    if THUMBS in data:
        if data[THUMBS]:
            old = before.get(THUMBS)
            record.give(run, RUN, author=reviewer, name=THUMBS, value=thumb(data[THUMBS]),
                        note=old.note if old else "")
        elif THUMBS in before:
            record.remove(before[THUMBS])
    for key in keys:
        raw = data.get(f"key-{key.pk}")
        if raw:
            record.give_key(run, RUN, reviewer, key, raw)
        elif key.name in before:
            record.remove(before[key.name])
    record.give_note(run, RUN, reviewer, data.get("note", ""))
    return _mark(item, reviewer, DONE)


@transaction.atomic
def choose(item: Item, reviewer: Any, choice: str, note: str) -> Review:
    """Pairwise: which run is better and why, as a review and as feedback on both runs."""
    limit = settings.AGENTLAB_FEEDBACK_NOTE_CHARS
    for run, other, (score, label) in ((item.run, item.run_b, PAIR_VALUES[choice][0]),
                                       (item.run_b, item.run, PAIR_VALUES[choice][1])):
        said = f"Compared with run {other.pk}" + (f": {note}" if note else ".")
        record.give(run, RUN, author=reviewer, name=PAIRWISE, value=Value(score, label),
                    note=said if len(said) <= limit else said[:limit - 1] + "…")
    return _mark(item, reviewer, DONE, choice=choice, note=note)


def skip(item: Item, reviewer: Any) -> Review | None:
    """Skipped for now; an item already answered stays answered."""
    if Review.objects.filter(item=item, reviewer=reviewer, status=DONE).exists():
        return None
    return _mark(item, reviewer, SKIPPED)


# -- progress --------------------------------------------------------------------------------

def with_counts(items: QuerySet[Item]) -> QuerySet[Item]:
    return items.annotate(done=Count("reviews", filter=Q(reviews__status=DONE)))


def todo(items: QuerySet[Item], queue: Queue, reviewer: Any, *,
         skipped: bool = False) -> QuerySet[Item]:
    """The items still needing reviews that the reviewer has not answered (nor skipped, unless
    `skipped`: then only those skipped)."""
    open_items = with_counts(items).filter(done__lt=queue.reviews_needed)
    if skipped:
        return open_items.filter(reviews__reviewer=reviewer, reviews__status=SKIPPED)
    return open_items.exclude(reviews__reviewer=reviewer)


@dataclass(frozen=True)
class Progress:
    total: int
    complete: int  # items with all the reviews they need
    mine_done: int
    mine_skipped: int

    @property
    def percent(self) -> int:
        return round(100 * self.complete / self.total) if self.total else 0

    @property
    def my_percent(self) -> int:
        return round(100 * self.mine_done / self.total) if self.total else 0


def progress(items: QuerySet[Item], queue: Queue, reviewer: Any) -> Progress:
    counted = with_counts(items)
    mine_rows = Review.objects.filter(item__in=items.values("pk"), reviewer=reviewer)
    return Progress(total=items.count(),
                    complete=counted.filter(done__gte=queue.reviews_needed).count(),
                    mine_done=mine_rows.filter(status=DONE).count(),
                    mine_skipped=mine_rows.filter(status=SKIPPED).count())


# -- who said what, and agreement ---------------------------------------------------------------

@dataclass
class Said:
    """One reviewer's answer to one item, for the queue's page."""

    reviewer: str
    status: str
    values: list[str] = field(default_factory=list)
    note: str = ""


def said(queue: Queue, items: Sequence[Item]) -> tuple[dict[int, list[Said]],
                                                      dict[int, dict[str, dict[int, Hashable]]]]:
    """Per item, who said what; and for agreement, per item, per key, per reviewer, the value
    (a label, or a number for numeric keys; "a"/"b"/"tie" for a pairwise choice)."""
    reviews = list(Review.objects.filter(item__in=items).select_related("reviewer")
                   .order_by("item_id", "created"))
    shown: dict[int, list[Said]] = defaultdict(list)
    values: dict[int, dict[str, dict[int, Hashable]]] = defaultdict(lambda: defaultdict(dict))
    feedback = _feedback(queue, items, reviews)
    run_of = {item.pk: item.run_id for item in items}
    for review in reviews:
        entry = Said(review.reviewer.get_username(), review.status)
        if queue.pairwise and review.status == DONE:
            entry.values.append(f"better: {CHOICE_WORDS.get(review.choice, '?')}")
            entry.note = review.note
            values[review.item_id]["choice"][review.reviewer_id] = review.choice
        elif review.status == DONE:
            for row in feedback.get((run_of[review.item_id], review.reviewer_id), []):
                if row.name == "note":
                    entry.note = row.note
                    continue
                entry.values.append(row.shown)
                numeric = row.key is not None and row.key.kind == "numeric"
                values[review.item_id][row.name][review.reviewer_id] = (
                    row.score if numeric else row.label)
        shown[review.item_id].append(entry)
    return shown, values


def _feedback(queue: Queue, items: Sequence[Item], reviews: Sequence[Review]
              ) -> dict[tuple[int, int], list[Feedback]]:
    if queue.pairwise:
        return {}
    names = [THUMBS] + [k.name for k in rubric(queue)] + ["note"]  # the rubric's order
    rows = Feedback.objects.filter(
        run_id__in={i.run_id for i in items}, seq=RUN, name__in=names,
        author_id__in={r.reviewer_id for r in reviews if r.status == DONE}
    ).select_related("key")
    found: dict[tuple[int, int], list[Feedback]] = defaultdict(list)
    for row in sorted(rows, key=lambda r: names.index(r.name)):
        found[(row.run_id, row.author_id)].append(row)
    return found


def agreement_of(queue: Queue, values: dict[int, dict[str, dict[int, Hashable]]]
                 ) -> list[tuple[str, agreement.Agreement]]:
    """Each rubric key's agreement (thumbs too; pairwise: the choice), in the rubric's order."""
    if queue.pairwise:
        names = ["choice"]
    else:
        names = ([THUMBS] if queue.thumbs else []) + [k.name for k in rubric(queue)]
    return list(agreement.by_key(values, names).items())
