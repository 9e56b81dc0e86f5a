"""The timeline of a long run as a stored aggregate, so the run page never reads every step.

Steps are grouped in buckets of `width` consecutive seqs (a power of two, at most BUCKETS
buckets) and, within a bucket, by kind: how many, their total and slowest time, the first seq
and the span of their starts. The aggregate is stored (RunTimeline) and covers the steps up to
`upto`; bringing it up to date reads only the steps after `upto` (an index range), and when the
run outgrows BUCKETS buckets, pairs of buckets are merged (the width doubles). A run's first
summary reads all its steps once (about a second per million on SQLite): an import does it as it
finishes, otherwise the timeline's own request does (the run page's first byte never waits).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Count, F, Max, Min, Sum

from traces.display import timeline as waterfall
from traces.display.view import TEXT_LABELS, epoch
from traces.models import Run, RunTimeline

BUCKETS = 200
SUMMED_FROM = 10_000  # runs longer than this have their timeline summed (shorter: steps)
INLINE_MAX = 20_000  # steps not yet summed that the run page itself may add (else deferred)
LIVE_MARGIN = 1_000  # a live run's last steps, read each time rather than stored
KIND_ORDER = {kind: i for i, kind in enumerate(TEXT_LABELS)}

# A bucket entry: [bucket, kind, count, total_ms, slowest_ms, first_seq, t0, t1] (t: epoch s)
Entry = list[Any]


def stale(run: Run, last: int, *, final: bool = True) -> int:
    """How many steps bringing the stored summary to `last` reads (all of them when there is
    none, or when it was summed while the run was live and the run has ended)."""
    found = RunTimeline.objects.filter(run=run).values_list("upto", "final").first()
    if found is None or (final and not found[1]):
        return last
    return last - found[0]


def update(run: Run, last: int, *, final: bool = True) -> RunTimeline:
    """The run's summary, brought up to step `last` (reads only the steps it lacks).

    A live run (`final` False) may still change its last steps (a step is written again when
    it ends), so only the steps up to LIVE_MARGIN before the last are stored; the others are
    read each time. When it has ended, a summary stored while it was live is summed again once
    (a parent step's time, say, is written when it ends)."""
    summary = RunTimeline.objects.filter(run=run).first() or RunTimeline(run=run)
    if summary.upto > last or (final and not summary.final):  # start over
        summary.upto, summary.width, summary.buckets = 0, 1, []
    settled = last if final else max(summary.upto, last - LIVE_MARGIN)
    if summary.upto == last and summary.final == final and not summary._state.adding:
        return summary
    width = summary.width or 1
    while last > width * BUCKETS:
        width *= 2
    entries = _rebucket(summary.buckets, summary.width or 1, width)
    entries = _merge(entries + _read(run, summary.upto, settled, width))
    summary.upto, summary.width, summary.buckets, summary.final = settled, width, entries, final
    summary.save()
    if settled < last:  # a live run's last steps: read now, not stored
        tail = _merge(entries + _read(run, settled, last, width))
        return RunTimeline(run=run, upto=last, width=width, buckets=tail)
    return summary


def _read(run: Run, after: int, upto: int, width: int) -> list[Entry]:
    rows = (run.steps.filter(seq__gt=after, seq__lte=upto).annotate(b=(F("seq") - 1) / width)
            .values("b", "kind").annotate(n=Count("id"), total=Sum("duration_ms"),
                                          slow=Max("duration_ms"), first=Min("seq"),
                                          t0=Min("started_at"), t1=Max("started_at"))
            .order_by())
    return [[r["b"], r["kind"], r["n"], r["total"] or 0.0, r["slow"] or 0.0, r["first"],
             _epoch(r["t0"]), _epoch(r["t1"])] for r in rows]


def _epoch(value: Any) -> float:
    if isinstance(value, str):  # SQLite may answer an aggregate of datetimes as text
        value = datetime.fromisoformat(value)
    return epoch(value) or 0.0


def _rebucket(entries: list[Entry], old: int, new: int) -> list[Entry]:
    factor = new // old
    return [[e[0] // factor, *e[1:]] for e in entries] if factor > 1 else list(entries)


def _merge(entries: list[Entry]) -> list[Entry]:
    """One entry per (bucket, kind)."""
    merged: dict[tuple[int, str], Entry] = {}
    for e in entries:
        key = (e[0], e[1])
        was = merged.get(key)
        if was is None:
            merged[key] = list(e)
            continue
        merged[key] = [e[0], e[1], was[2] + e[2], was[3] + e[3], max(was[4], e[4]),
                       min(was[5], e[5]), min(was[6], e[6]), max(was[7], e[7])]
    return sorted(merged.values(), key=lambda e: (e[0], KIND_ORDER.get(e[1], 99)))


def bars(summary: RunTimeline) -> tuple[list[waterfall.Bar], list[str]]:
    """Waterfall bars, one per bucket and kind, in a lane per kind; and the lanes' labels.
    A bar spans its steps' starts (plus the slowest's time) and links to its first step."""
    entries = summary.buckets
    if not entries:
        return [], []
    t0 = min(e[6] for e in entries)
    t1 = max(e[7] + e[4] / 1000 for e in entries)
    span = max(t1 - t0, 1e-3)
    kinds = sorted({e[1] for e in entries}, key=lambda k: KIND_ORDER.get(k, 99))
    out = []
    for b, kind, n, total, slow, first, start, end in entries:
        left = min(max((start - t0) / span * 100, 0.0), 100.0)
        width = min(max((end + slow / 1000 - start) / span * 100, 0.25), 100.0 - left)
        out.append(waterfall.Bar(first, kind, round(left, 3), round(max(width, 0.25), 3), slow,
                                 lane=kinds.index(kind), count=n, total_ms=total,
                                 upto=min((b + 1) * summary.width, summary.upto)))
    return out, kinds
