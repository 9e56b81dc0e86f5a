"""The run page's waterfall: a bar per step, in percent of the run's span, and their lanes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from traces.display.figures import format_duration, format_tokens
from traces.display.view import TEXT_LABELS, epoch


@dataclass
class Bar:
    seq: int
    kind: str
    left: float  # percent of the run's span
    width: float
    duration_ms: float
    lane: int = 0
    # a bar of a long run's aggregate (traces.timeline_summary): its steps seq..upto
    count: int = 1
    total_ms: float = 0.0
    upto: int = 0


def timeline(rows: list[tuple[int, str, Any, float | None]], *, start: Any = None,
             end: Any = None) -> list[Bar]:
    """Waterfall bars from (seq, kind, started_at, duration_ms), positioned in percent of the
    span from the first start to the last end (or the given start/end)."""
    if not rows:
        return []
    starts = [epoch(r[2]) or 0.0 for r in rows]
    t0 = epoch(start) if start is not None else min(starts)
    t1 = epoch(end) if end is not None else max(
        s + (r[3] or 0) / 1000 for s, r in zip(starts, rows, strict=True))
    span = max(t1 - t0, 1e-3)
    bars = []
    for s, (seq, kind, _started, duration) in zip(starts, rows, strict=True):
        left = min(max((s - t0) / span * 100, 0.0), 100.0)
        width = min(max((duration or 0) / 1000 / span * 100, 0.25), 100.0 - left)
        bars.append(Bar(seq, kind, round(left, 3), round(max(width, 0.25), 3), duration or 0))
    return bars


def lanes(bars: list[Bar], *, per_step_max: int = 80) -> list[str]:
    """Give each bar a lane (in place): its own row for small runs, one row per kind for big ones.
    Returns the lane labels."""
    if len(bars) <= per_step_max:
        for index, bar in enumerate(bars):
            bar.lane = index
        return [f"#{bar.seq}" for bar in bars]
    kinds = sorted({bar.kind for bar in bars}, key=lambda k: TEXT_LABELS_ORDER.get(k, 99))
    for bar in bars:
        bar.lane = kinds.index(bar.kind)
    return kinds


TEXT_LABELS_ORDER = {kind: i for i, kind in enumerate(TEXT_LABELS)}


def bars_html(bars: list[Bar], *, bucketed: bool = False) -> SafeString:
    """The waterfall's links, built in Python: a long run's page has a thousand of them and the
    template engine took most of its time drawing them. The kind is escaped (it is recorded)."""
    out = []
    for bar in bars:
        kind = escape(bar.kind)
        if bucketed:
            count = bar.count
            title = (f"#{bar.seq}–#{bar.upto}: {format_tokens(count)} {kind} "
                     f"step{'s' if count != 1 else ''} · {format_duration(bar.total_ms)} in all"
                     f" · slowest {format_duration(bar.duration_ms)}")
            upto = f' data-upto="{bar.upto}"'
        else:
            title, upto = f"#{bar.seq} {kind} · {format_duration(bar.duration_ms)}", ""
        out.append(f'<a class="bar k-{kind}" href="?step={bar.seq}" data-go="{bar.seq}"{upto}\n'
                   f'       style="left: {bar.left}%; width: {bar.width}%; --lane: {bar.lane}"\n'
                   f'       title="{title}"></a>')
    return mark_safe("".join(out))  # noqa: S308 (every recorded value above is escaped)
