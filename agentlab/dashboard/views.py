"""The dashboard page: the figures of queries.py as tables and charts, each linked to the runs
behind it through the runs list's own filters (traces/views/filters.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from agentlab.dashboard import queries
from agentlab.dashboard.feedback import FeedbackFigures, over_time
from agentlab.dashboard.period import GROUPS, PERIODS, DashboardForm, Period
from agentlab.dashboard.queries import OUTCOMES, PHASES, Figures, GroupFigures, PhaseFigures
from agentlab.models import Tool
from agentlab.tools.registry import get_tool
from traces.display.figures import format_cost, format_duration, format_percent, format_seconds
from traces.display.labels import paradigm_name, status_word
from traces.views.filters import FINISHED

OUTCOME_LABELS = {s: status_word(s) for s in OUTCOMES}


@require_GET
def dashboard(request: HttpRequest) -> HttpResponse:
    form = DashboardForm(request.GET)
    period = form.chosen()
    found = queries.figures(request.user, period)
    known = known_tools(t.name for t in found.tools)
    groups = [group_row(g, period) for g in found.groups]
    if period.group == "paradigm":  # "Multi-Agent", not multi_agent
        for g in groups:
            g["label"] = paradigm_name(g["key"]) if g["key"] else g["label"]
    context = {
        "form": form, "period": period, "periods": PERIODS, "group_label": GROUPS[period.group],
        "figures": found, "groups": groups, "outcomes": OUTCOME_LABELS, "phases": PHASES,
        "overall_phases": [phase_cells(p, found.phases.get(p)) for p in PHASES],
        "tools": [tool_row(t, period, known) for t in found.tools],
        "guardrails": [guardrail_row(g, period) for g in found.guardrails],
        "all_runs_url": period.runs_url(status=FINISHED),
        "chart": chart_data(found, groups, period, known),
    }
    feedback = over_time(request.user, period)
    context["feedback"] = feedback
    context["chart"]["feedback"] = feedback_chart(feedback, period)
    return render(request, "dashboard/index.html", context)


def group_row(g: GroupFigures, period: Period) -> dict[str, Any]:
    """One group's figures as the page shows them, each linked to exactly the runs it counts
    (finished runs only, like the figures)."""
    def url(status: str = FINISHED, **filters: str) -> str | None:
        # A blank key (a run without agent or model) has no runs-list filter to link with.
        return period.runs_url(g.key, status=status, **filters) if g.key else None

    return {
        "key": g.key, "label": g.key or "(none)", "figures": g, "runs": g.runs, "url": url(),
        "outcomes": [(s, g.outcomes[s], url(status=s)) for s in OUTCOMES],
        "completion": pct(g.completion_rate), "succeeded_url": url(status="succeeded"),
        "work": [(num(g.avg[k]), num(g.p95[k])) for k in ("steps", "llm_calls", "tool_calls")],
        "steps_url": url(sort="-steps"),
        "tokens": f"{g.tokens:,}", "tokens_per_run": num(g.tokens_per_run, 0),
        "cost": format_cost(g.cost_usd), "cost_per_run": format_cost(g.cost_per_run),
        "tokens_url": url(sort="-tokens"), "cost_url": url(sort="-cost"),
        "format_url": url(format_errors="1"), "reflection_url": url(reflections="1"),
        "reflection_success_url": url(status="succeeded", reflections="1"),
        "format_runs": pct(g.format_error_rate), "format_per_call": pct(g.format_errors_per_call),
        "format_counts": f"{g.format_error_runs} of {g.runs} runs, {g.format_errors} of "
                         f"{g.llm_calls} LLM calls",
        "reflection_rate": pct(g.reflection_rate), "reflection_success": pct(g.reflection_success),
        "reflection_counts": f"{g.reflection_succeeded} of {g.reflection_runs} succeeded",
        "phases": [phase_cells(p, g.phases.get(p)) for p in PHASES],
        "duration_url": url(sort="-duration"),
    }


def phase_cells(phase: str, f: PhaseFigures | None) -> dict[str, Any]:
    if f is None:
        return {"phase": phase, "calls": 0, "p50": "—", "p95": "—", "total": "—"}
    # Seconds throughout, as the latency chart draws them.
    return {"phase": phase, "calls": f.calls, "p50": format_seconds(f.p50_ms),
            "p95": format_seconds(f.p95_ms), "total": format_seconds(f.total_ms)}


def known_tools(names: Iterable[str]) -> set[str]:
    """The names that are tools: registered in code, or a Tool row (an MCP server's tools).

    A name the model made up is not a tool: its calls are shown as calls to an unknown tool."""
    names = set(names)
    return {n for n in names if get_tool(n) is not None} | set(
        Tool.objects.filter(name__in=names).values_list("name", flat=True))


def tool_row(t: queries.ToolFigures, period: Period, known: set[str]) -> dict[str, Any]:
    """A tool's figures; its links list the finished runs that called it (ok / with an error)."""
    return {"name": t.name, "known": t.name in known,
            "calls": t.calls, "ok": t.ok, "errors": t.errors,
            "success": pct(t.success_rate), "avg": format_duration(t.avg_ms),
            "top_errors": t.top_errors, "url": tool_url(period, t.name),
            "ok_url": tool_url(period, t.name, "ok"),
            "errors_url": tool_url(period, t.name, "error")}


def guardrail_row(g: queries.GuardrailFigures, period: Period) -> dict[str, Any]:
    """A guardrail's decisions; each count links to the finished runs it acted in so."""
    def url(action: str = "any") -> str:
        return period.runs_url(status=FINISHED, guardrail=g.name, guardrail_action=action)

    return {"name": g.name, "decisions": g.decisions, "runs": g.runs, "url": url(),
            "actions": [(n, url(a) if n else None) for n, a in
                        ((g.blocked, "block"), (g.redacted, "redact"), (g.flagged, "flag"))]}


def tool_url(period: Period, name: str, result: str = "") -> str:
    return period.runs_url(status=FINISHED, tool=name, tool_status=result)


def chart_data(found: Figures, groups: list[dict[str, Any]], period: Period,
               known: set[str]) -> dict[str, Any]:
    """What static/agentlab/dashboard.js draws; `links` are where a click on a bar goes."""
    labels = [g["label"] for g in groups]
    phases = [found.phases.get(p) for p in PHASES]
    return {
        "outcomes": {"labels": labels, "series": [
            {"key": s, "label": OUTCOME_LABELS[s],
             "data": [g["figures"].outcomes[s] for g in groups],
             "links": [g["outcomes"][i][2] for g in groups]}
            for i, s in enumerate(OUTCOMES)]},
        "usage": {"labels": labels,
                  "tokens_per_run": [_round(g["figures"].tokens_per_run, 1) for g in groups],
                  "cost_usd": [_round(g["figures"].cost_usd, 6) for g in groups],
                  "links": [g["tokens_url"] for g in groups]},
        "latency": {"labels": list(PHASES),
                    "p50_s": [_round(f and f.p50_ms and f.p50_ms / 1000, 3) for f in phases],
                    "p95_s": [_round(f and f.p95_ms and f.p95_ms / 1000, 3) for f in phases],
                    "links": [period.runs_url(status=FINISHED, sort="-duration")] * len(PHASES)},
        "tools": {"labels": [t.name if t.name in known else f"unknown tool {t.name}"
                             for t in found.tools],
                  "success_pct": [_round(t.success_rate and t.success_rate * 100, 1)
                                  for t in found.tools],
                  "links": [tool_url(period, t.name) for t in found.tools]},
    }


def feedback_chart(f: FeedbackFigures, period: Period) -> dict[str, Any]:
    """Feedback given per bucket, a stacked bar per group; and thumbs up and down. A click
    opens the runs of that group with feedback (of that kind)."""
    def url(group: str | None, feedback: str) -> str:
        # Not the period's dates: those narrow runs by when they ran, and feedback given this
        # week may be on an older run.
        params = {"feedback": feedback}
        if group and not group.startswith("("):
            params[period.group] = group
        return f"{reverse('runs')}?{urlencode(params)}"

    return {"labels": f.labels, "group_label": GROUPS[period.group],
            "series": [{"label": g, "data": data, "link": url(g, "any")}
                       for g, data in f.series.items()],
            "up": f.up, "down": f.down,
            "up_link": url(None, "up"), "down_link": url(None, "down")}


def pct(share: float | None) -> str:
    return format_percent(share)


def num(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "—"
    text = f"{value:,.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)
