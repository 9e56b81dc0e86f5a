"""The run page's timeline: every step, the slowest, or a stored aggregate for long runs.

Up to SUMMED_FROM steps the bars are steps (all of them, or the slowest when there
are many): a bounded read. Past that, the bars are buckets of consecutive steps per kind
(traces.timeline_summary), stored and brought up to date by reading only new steps; when more
than INLINE_MAX steps are not summed yet (a long run never summed), the page shows a placeholder
that loads `run_timeline`, so its first byte never waits for a read of the whole run.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from traces import access, timeline_summary
from traces.display import timeline as waterfall
from traces.models import Run
from traces.views import steps as loader


def timeline_context(run: Run, last: int, *, deferrable: bool = True) -> dict[str, Any]:
    if last <= timeline_summary.SUMMED_FROM:
        bars, shown = loader.timeline(run, last)
        labels = waterfall.lanes(bars)
        return _context(bars, labels, bars_shown=shown,
                        by_kind=len(bars) > 0 and not labels[0].startswith("#"))
    final = not run.is_active
    if deferrable and timeline_summary.stale(run, last, final=final) > timeline_summary.INLINE_MAX:
        return {"timeline_deferred": True, "bars": []}
    summary = timeline_summary.update(run, last, final=final)
    bars, labels = timeline_summary.bars(summary)
    return _context(bars, labels, bars_shown=last, by_kind=True,
                    bucket_width=summary.width)


def _context(bars: list[waterfall.Bar], labels: list[str], **more: Any) -> dict[str, Any]:
    bars_html = waterfall.bars_html(bars, bucketed="bucket_width" in more)
    return {"bars": bars, "bars_html": bars_html, "lane_labels": labels,
            "lanes_height": max(len(labels), 1) * 14 + 4,
            "legend": sorted({bar.kind for bar in bars}), **more}


def run_timeline(request: HttpRequest, pk: int) -> HttpResponse:
    """The timeline of a long run whose aggregate was not summed yet (it is now, and kept)."""
    run = access.visible_run(request.user, pk, Run.objects.defer("history"))
    last = loader.last_seq(run)
    context = {"run": run, "last_seq": last, **timeline_context(run, last, deferrable=False)}
    return render(request, "traces/_timeline.html", context)
