"""The runs list's "Feedback" filter (hooks `feedback_filter`, `feedback_filter_choices`, asked
by traces/views/filters.py): `any`, `up`, `down`, `note`, a key's name, or `key=value`,
`key>=4`…; the grammar and its refusals are values.parse_filter's."""

from __future__ import annotations

from django.db.models import Exists, OuterRef, Q

from agentlab.feedback.models import Feedback, FeedbackKey
from agentlab.feedback.values import BOOLEAN, NOTE, parse_filter

MAX_SUGGESTIONS = 200
LOOKUPS = {">=": "score__gte", "<=": "score__lte", ">": "score__gt", "<": "score__lt"}


def runs_with(text: str) -> Exists:
    """An Exists() over the feedback a run must have (values.FeedbackError, a ValueError, for
    text that is not a filter)."""
    wanted = parse_filter(text, set(FeedbackKey.objects.values_list("name", flat=True)))
    rows = Feedback.objects.filter(run=OuterRef("pk"))
    if wanted.name == NOTE and wanted.op == "any":  # any note: on its own or with a value
        return Exists(rows.exclude(note=""))
    if wanted.name is not None:
        rows = rows.filter(name=wanted.name)
    if wanted.op == "=":
        labels = {wanted.value}
        if wanted.value.lower() in BOOLEAN:
            labels.add(BOOLEAN[wanted.value.lower()][0])
        match = Q(label__in=labels)
        if wanted.number is not None:
            match |= Q(score=wanted.number)
        rows = rows.filter(match)
    elif wanted.op in LOOKUPS:
        rows = rows.filter(**{LOOKUPS[wanted.op]: wanted.number})
    return Exists(rows)


def suggestions() -> list[tuple[str, str]]:
    """What the filter's input offers as you type: the shorthands, then each key's values."""
    found = [("any", "any feedback"), ("up", "thumbs up"), ("down", "thumbs down"),
             ("note", "with a note")]
    for key in FeedbackKey.objects.all():
        found.append((key.name, f"any {key.name}"))
        if key.kind == "categories":
            found += [(f"{key.name}={label}", "") for label in key.spec.labels]
        elif key.kind == "boolean":
            found += [(f"{key.name}=yes", ""), (f"{key.name}=no", "")]
        else:
            found += [(f"{key.name}>={key.maximum:g}", "the highest"),
                      (f"{key.name}<={key.minimum:g}", "the lowest")]
        if len(found) >= MAX_SUGGESTIONS:
            break
    return found[:MAX_SUGGESTIONS]
