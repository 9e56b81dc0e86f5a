"""Two runs side by side: aligned rows, word diffs, the first divergence, a summary of deltas.

A page shows one page of rows (traces.diff_pages) from the first divergence or `?at=`; more
rows, and the inside of folds, come by htmx from the same URL with `part=rows`."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from traces.diff import diff_steps, totals_from_run, word_diffs
from traces.diff_pages import PAGE_ROWS, Subtrees, page, start_of
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
    steps_a = [s.to_record() for s in run_a.steps.all()]
    steps_b = [s.to_record() for s in run_b.steps.all()]
    result = diff_steps(steps_a, steps_b, totals_a=totals_from_run(run_a),
                        totals_b=totals_from_run(run_b), shown=0)
    at = _int(request, "at")
    at = start_of(result.first_divergence) if at is None else at
    part = request.GET.get("part") == "rows"
    shown = page(result.rows, Subtrees(result.rows), at, stop=_int(request, "stop"),
                 flat=part and request.GET.get("flat") == "1", size=PAGE_ROWS)
    word_diffs(item.row for item in shown.items if item.kind == "row" and item.row)
    base = f"{reverse('run_diff')}?a={pk_a}&b={pk_b}"
    stop = _int(request, "stop")
    more = f"{base}&part=rows" + (f"&stop={stop}&flat=1" if part and stop is not None else "")
    context = {"a": run_a, "b": run_b, "page": shown, "first": result.first_divergence,
               "base": base, "more": more, "earlier": max(0, shown.at - PAGE_ROWS)}
    if part:
        return render(request, "traces/diff.html#diffrows", context)
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
    return render(request, "traces/diff.html", {
        **context, "summary": summary, "figures": figures, "counts": counts,
        "total": len(result.rows),
    })
