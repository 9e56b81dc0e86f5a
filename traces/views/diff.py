"""Two runs side by side: aligned rows, word diffs, the first divergence, a summary of deltas.

A page shows one page of rows (traces.diff_pages) from the first divergence or `?at=`; more
rows, and the inside of folds, come by htmx from the same URL with `part=rows`."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from traces.diff import diff_steps, totals_from_run, word_diffs
from traces.diff_pages import PAGE_ROWS, Subtrees, page, start_of
from traces.models import Run
from traces.views.run import visible_run


def _pair(request: HttpRequest) -> tuple[int, int]:
    a, b = request.GET.get("a"), request.GET.get("b")
    if not (a and b):  # the runs list's checkboxes send ?run=A&run=B
        picked = request.GET.getlist("run")
        a, b = (picked + [None, None])[:2]
    try:
        return int(a), int(b)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise Http404("pick two runs to compare") from None


def _int(request: HttpRequest, name: str) -> int | None:
    try:
        return max(0, int(request.GET[name]))
    except (KeyError, ValueError):
        return None


def run_diff(request: HttpRequest) -> HttpResponse:
    """The page of two runs' diff from `?at=` (a row; by default just above the first
    divergence). `?part=rows` answers only the rows from `at` (htmx: "more", or a fold being
    opened up to `stop`, `flat`)."""
    pk_a, pk_b = _pair(request)
    run_a, run_b = visible_run(request, pk_a), visible_run(request, pk_b)
    part = request.GET.get("part") == "rows"
    context = diff_context(run_a, run_b, at=_int(request, "at"), stop=_int(request, "stop"),
                           rows_only=part, flat=part and request.GET.get("flat") == "1")
    if part:
        return render(request, "traces/diff.html#diffrows", context)
    return render(request, "traces/diff.html", context)


def diff_context(run_a: Run, run_b: Run, *, at: int | None = None, stop: int | None = None,
                 rows_only: bool = False, flat: bool = False) -> dict[str, Any]:
    """What the diff page and its partials show for two runs the caller has authorized (the
    review queue's pairwise item shows its summary and first page too)."""
    steps_a = [s.to_record() for s in run_a.steps.all()]
    steps_b = [s.to_record() for s in run_b.steps.all()]
    result = diff_steps(steps_a, steps_b, totals_a=totals_from_run(run_a),
                        totals_b=totals_from_run(run_b), shown=0)
    at = start_of(result.first_divergence) if at is None else at
    shown = page(result.rows, Subtrees(result.rows), at, stop=stop, flat=flat, size=PAGE_ROWS)
    word_diffs(item.row for item in shown.items if item.kind == "row" and item.row)
    base = f"{reverse('run_diff')}?a={run_a.pk}&b={run_b.pk}"
    more = f"{base}&part=rows" + (f"&stop={stop}&flat=1" if rows_only and stop is not None
                                  else "")
    context = {"a": run_a, "b": run_b, "page": shown, "first": result.first_divergence,
               "base": base, "more": more, "earlier": max(0, shown.at - PAGE_ROWS)}
    if rows_only:
        return context
    summary = result.summary
    figures = [
        {"label": label, "a": summary.totals_a.get(key), "b": summary.totals_b.get(key),
         "delta": summary.deltas.get(key), "kind": kind}
        for key, label, kind in (("steps", "Steps", ""), ("llm_calls", "LLM calls", ""),
                                 ("tool_calls", "Tool calls", ""), ("tokens", "Tokens", ""),
                                 ("cost_usd", "Cost", "cost"), ("wall_ms", "Wall time", "ms"))
    ]
    counts = {op: sum(1 for r in result.rows if r.op == op)
              for op in ("equal", "changed", "inserted", "deleted")}
    return {**context, "summary": summary, "figures": figures, "counts": counts,
            "total": len(result.rows)}
