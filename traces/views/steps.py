"""Loading steps for the run page without loading what it does not show.

A page of steps is one query for the small columns plus payload *sizes* (computed in the
database), then one query per payload field for the rows whose payload is small enough to show
inline. Big payloads stay in the database until someone opens them.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Max, Min, QuerySet, TextField
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import Cast, Length

from traces.display import timeline as waterfall
from traces.display.renderer import StepRenderer
from traces.display.view import PAYLOAD_LIMIT, StepView
from traces.models import Run, Step

PAGE_SIZE = 200
MAX_PAGE = 2000  # "load up to step N" never asks for more than this at once
TIMELINE_ALL = 400  # runs with more steps show their slowest TIMELINE_CAP steps only
TIMELINE_CAP = 300
SMALL_FIELDS = ("seq", "parent", "kind", "role", "name", "status", "started_at", "duration_ms",
                "tokens_in", "tokens_out", "cost_usd", "meta")
PAYLOADS = ("input", "output", "text")


def _sized(steps: QuerySet[Step]) -> QuerySet[Step]:
    return steps.annotate(
        input_size=Length(Cast("input", TextField())),
        output_size=Length(Cast("output", TextField())),
        text_size=Length("text"),
        tool_calls=KeyTransform("tool_calls", "output"),
    )


def load_rows(run: Run, *, after: int = 0, limit: int = PAGE_SIZE) -> list[dict[str, Any]]:
    """Rows with seq > after, as dicts; input/output/text only where under the inline limit."""
    rows = list(_sized(run.steps.filter(seq__gt=after)).order_by("seq")
                .values("pk", *SMALL_FIELDS, "input_size", "output_size", "text_size",
                        "tool_calls")[:limit])
    for name in PAYLOADS:
        small = [r["pk"] for r in rows if (r[f"{name}_size"] or 0) <= PAYLOAD_LIMIT]
        if small:
            values = dict(Step.objects.filter(pk__in=small).values_list("pk", name))
            for row in rows:
                if row["pk"] in values:
                    row[name] = values[row["pk"]]
    return rows


ANCESTRY_LEVELS = 3  # ancestors looked up a level at a time; deeper, all parents in one query


def ancestry(run: Run, rows: list[dict[str, Any]]) -> dict[int, int | None]:
    """The parent of each row and of every ancestor outside the page, for the renderer's tree
    depths: a level at a time for ANCESTRY_LEVELS levels, then every earlier step's parent in
    one query (a deep tree costs one more query, not one per level)."""
    parent_of = {r["seq"]: r["parent"] for r in rows}
    for level in range(ANCESTRY_LEVELS + 1):
        missing = {p for p in parent_of.values() if p is not None and p not in parent_of}
        if not missing:
            break
        steps = run.steps.filter(seq__in=missing)
        if level == ANCESTRY_LEVELS:
            steps = run.steps.all()
        found = dict(steps.values_list("seq", "parent"))
        parent_of.update({seq: found.get(seq) for seq in missing})
        parent_of.update({seq: parent for seq, parent in found.items() if seq not in parent_of})
    return parent_of


def step_views(run: Run, *, after: int = 0, limit: int = PAGE_SIZE) -> list[StepView]:
    rows = load_rows(run, after=after, limit=limit)
    renderer = StepRenderer(run, run_start=run_start(run), parents=ancestry(run, rows))
    return [renderer.view(r) for r in rows]


def run_start(run: Run) -> Any:
    if run.started_at:
        return run.started_at
    return run.steps.aggregate(t=Min("started_at"))["t"] or run.created


def last_seq(run: Run) -> int:
    return run.steps.aggregate(m=Max("seq"))["m"] or 0


def timeline(run: Run, count: int) -> tuple[list[waterfall.Bar], int]:
    """Bars for the waterfall and how many steps they stand for; big runs show their slowest."""
    fields = ("seq", "kind", "started_at", "duration_ms")
    if count <= TIMELINE_ALL:
        return waterfall.timeline(list(run.steps.values_list(*fields))), count
    span = run.steps.aggregate(start=Min("started_at"), last=Max("started_at"))
    slow = list(run.steps.exclude(duration_ms=None).order_by("-duration_ms")
                .values_list(*fields)[:TIMELINE_CAP])
    slow.sort(key=lambda r: r[0])
    end = max([span["last"].timestamp()] + [r[2].timestamp() + (r[3] or 0) / 1000
                                             for r in slow])
    return waterfall.timeline(slow, start=span["start"], end=end), len(slow)
