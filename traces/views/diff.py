"""Two runs side by side: aligned rows, word diffs, the first divergence, a summary of deltas."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from traces.diff import diff_steps, totals_from_run
from traces.models import Run
from traces.views.run import visible_run

MAX_ROWS = 3000  # beyond this many rows the page shows the first ones and says so
FOLD_EQUAL = 6  # runs of more equal rows than this are folded to their two ends


def _pair(request: HttpRequest) -> tuple[int, int]:
    a, b = request.GET.get("a"), request.GET.get("b")
    if not (a and b):  # the runs list's checkboxes send ?run=A&run=B
        picked = request.GET.getlist("run")
        a, b = (picked + [None, None])[:2]
    try:
        return int(a), int(b)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise Http404("pick two runs to compare") from None


def run_diff(request: HttpRequest) -> HttpResponse:
    pk_a, pk_b = _pair(request)
    run_a, run_b = visible_run(request, pk_a), visible_run(request, pk_b)
    return render(request, "traces/diff.html", diff_context(run_a, run_b))


def diff_context(run_a: Run, run_b: Run) -> dict[str, Any]:
    """What the diff page's partials show for two runs the caller has authorized."""
    steps_a = [s.to_record() for s in run_a.steps.all()]
    steps_b = [s.to_record() for s in run_b.steps.all()]
    result = diff_steps(steps_a, steps_b, totals_a=totals_from_run(run_a),
                        totals_b=totals_from_run(run_b), shown=MAX_ROWS)
    rows = [{"index": i, "row": row} for i, row in enumerate(result.rows[:MAX_ROWS])]
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
    return {
        "a": run_a, "b": run_b, "rows": _fold(rows), "summary": summary, "figures": figures,
        "first": result.first_divergence, "counts": counts,
        "cut": len(result.rows) - MAX_ROWS if len(result.rows) > MAX_ROWS else 0,
    }


def _fold(rows: list[dict]) -> list[dict]:
    """Mark the middle of long equal stretches as folded (the template hides them in one
    <details>), so what differs is what the eye finds."""
    out: list[dict] = []
    i = 0
    while i < len(rows):
        j = i
        while j < len(rows) and rows[j]["row"].op == "equal":
            j += 1
        if j - i > FOLD_EQUAL:
            out += rows[i:i + 2]
            out.append({"folded": rows[i + 2:j - 2]})
            out += rows[j - 2:j]
        else:
            out += rows[i:j]
        if j < len(rows):
            out.append(rows[j])
        i = j + 1
    return out
