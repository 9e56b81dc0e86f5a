"""Loading steps for the run page without loading what it does not show.

A page of steps is one query for the small columns plus payload *sizes* (computed in the
database), then one query per payload field for the rows whose payload is small enough to show
inline. Big payloads stay in the database until someone opens them.
"""

from __future__ import annotations

from typing import Any

from django.db import connection
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
# A link to step N far in the run shows N-30..N+29, not 1..N: a few screens around it, light
# enough for a browser to lay out at once; scrolling loads more either way.
WINDOW_BEFORE, WINDOW_SIZE = 30, 60
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


def load_rows(run: Run, *, after: int = 0, limit: int = PAGE_SIZE,
              before: int | None = None) -> list[dict[str, Any]]:
    """Rows with seq > after (or the `limit` last ones with seq < before), as dicts, in seq
    order; input/output/text only where under the inline limit. An index range either way."""
    fields = ("pk", *SMALL_FIELDS, "input_size", "output_size", "text_size", "tool_calls")
    if before is not None:
        rows = list(_sized(run.steps.filter(seq__lt=before)).order_by("-seq")
                    .values(*fields)[:limit])[::-1]
    else:
        rows = list(_sized(run.steps.filter(seq__gt=after)).order_by("seq")
                    .values(*fields)[:limit])
    for name in PAYLOADS:
        small = [r["pk"] for r in rows if (r[f"{name}_size"] or 0) <= PAYLOAD_LIMIT]
        if small:
            values = dict(Step.objects.filter(pk__in=small).values_list("pk", name))
            for row in rows:
                if row["pk"] in values:
                    row[name] = values[row["pk"]]
    return rows


ANCESTRY_LEVELS = 3  # ancestors looked up a level at a time; deeper, the rest in one query


def ancestry(run: Run, rows: list[dict[str, Any]]) -> dict[int, int | None]:
    """The parent of each row and of every ancestor outside the page, for the renderer's tree
    depths: a level at a time for ANCESTRY_LEVELS levels, then the remaining ancestors in one
    recursive query (a deep tree costs one more query, and never reads the whole run)."""
    parent_of = {r["seq"]: r["parent"] for r in rows}
    for level in range(ANCESTRY_LEVELS + 1):
        missing = {p for p in parent_of.values() if p is not None and p not in parent_of}
        if not missing:
            break
        if level == ANCESTRY_LEVELS:
            found = _ancestors(run, missing)
        else:
            found = dict(run.steps.filter(seq__in=missing).values_list("seq", "parent"))
        parent_of.update({seq: found.get(seq) for seq in missing})
        parent_of.update({seq: parent for seq, parent in found.items() if seq not in parent_of})
    return parent_of


def _ancestors(run: Run, seqs: set[int]) -> dict[int, int | None]:
    """(seq, parent) of `seqs` and all their ancestors: one recursive query, one indexed
    (run, seq) lookup per ancestor. UNION (not UNION ALL) stops at a cycle."""
    table = connection.ops.quote_name(Step._meta.db_table)
    marks = ", ".join(["%s"] * len(seqs))
    sql = (f"WITH RECURSIVE up(seq, parent) AS ("
           f"SELECT seq, parent FROM {table} WHERE run_id = %s AND seq IN ({marks}) "
           f"UNION SELECT s.seq, s.parent FROM {table} s JOIN up ON s.run_id = %s "
           f"AND s.seq = up.parent) SELECT seq, parent FROM up")
    with connection.cursor() as cursor:
        cursor.execute(sql, [run.pk, *sorted(seqs), run.pk])
        return dict(cursor.fetchall())


def step_views(run: Run, *, after: int = 0, limit: int = PAGE_SIZE,
               before: int | None = None) -> list[StepView]:
    rows = load_rows(run, after=after, limit=limit, before=before)
    renderer = StepRenderer(run, run_start=run_start(run), parents=ancestry(run, rows))
    return [renderer.view(r) for r in rows]


def run_start(run: Run) -> Any:
    if run.started_at:
        return run.started_at
    return run.steps.aggregate(t=Min("started_at"))["t"] or run.created


def last_seq(run: Run) -> int:
    return run.steps.aggregate(m=Max("seq"))["m"] or 0


PATH_MAX = 20  # the enclosing steps named above a page that starts inside them


def enclosing(run: Run, parent: int | None) -> list[dict[str, Any]]:
    """Step `parent` and the steps around it, outermost first (seq, kind, name): where a page
    that starts past the run's first step sits in the tree. Two queries, whatever the run."""
    if parent is None:
        return []
    up = _ancestors(run, {parent})
    chain, seq = [], parent
    while seq is not None and seq in up and seq not in chain and len(chain) < PATH_MAX:
        chain.append(seq)
        seq = up[seq]
    rows = {r["seq"]: r for r in run.steps.filter(seq__in=chain).values("seq", "kind", "name")}
    return [rows[s] for s in reversed(chain) if s in rows]


def first_before(run: Run, seq: int) -> int | None:
    """The seq of the last step before `seq` (None: it is the first), for "load earlier"."""
    return run.steps.filter(seq__lt=seq).order_by("-seq").values_list("seq", flat=True).first()


def timeline(run: Run, count: int) -> tuple[list[waterfall.Bar], int]:
    """Bars for the waterfall and how many steps they stand for; big runs show their slowest
    (longer runs: traces.timeline_summary instead)."""
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
