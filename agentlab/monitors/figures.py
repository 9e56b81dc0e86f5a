"""What a live scorer's page shows, over the scores of the runs the visitor may see: counts,
the rolling average, the scorer's failure rate, time and cost, by day and score by score."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Q, Sum
from django.db.models.functions import TruncDate

from agentlab.monitors import budget, rules
from agentlab.monitors.models import LiveScore, LiveScorer

RECENT = 200  # scores the chart and the figures read
DAYS = 14  # days the daily chart shows
TABLE = 50  # rows of the table


def scorer_figures(scorer: LiveScorer, user: Any, now: datetime) -> dict[str, Any]:
    rows = LiveScore.objects.visible_to(user).filter(scorer=scorer)
    recent = list(rows.exclude(status="running").order_by("-pk").values(
        "status", "score", "passed", "duration_ms", "cost_usd", "claimed_at")[:RECENT])
    recent.reverse()
    scored = [r for r in recent if r["status"] == "done"]
    attempted = [r for r in recent if r["status"] in ("done", "error")]
    times = sorted(r["duration_ms"] for r in attempted if r["duration_ms"] is not None)
    last = [r["score"] for r in scored[-scorer.window:]]
    totals = rows.aggregate(
        done=Count("pk", filter=Q(status="done")), error=Count("pk", filter=Q(status="error")),
        unanswered=Count("pk", filter=Q(status="unanswered")),
        skipped=Count("pk", filter=Q(status="skipped")), cost=Sum("cost_usd"),
        cost_today=Sum("cost_usd", filter=Q(claimed_at__gte=budget.day_start(now))),
        calls_today=Sum("calls", filter=Q(claimed_at__gte=budget.day_start(now))))
    return {
        "totals": totals,
        "rolling": rules.mean(last), "rolling_n": len(last),
        "pass_rate": rules.mean(float(bool(r["passed"])) for r in scored[-scorer.window:]),
        "failure_rate": (sum(r["status"] == "error" for r in attempted) / len(attempted)
                         if attempted else None), "attempted": len(attempted),
        "mean_ms": rules.mean(times), "p95_ms": times[int(0.95 * (len(times) - 1))]
        if times else None,
        "chart": {"rolling": _rolling_series(scored, scorer.window),
                  "days": _days(rows, now)},
    }


def _rolling_series(scored: list[dict[str, Any]], window: int) -> dict[str, list[Any]]:
    values = [r["score"] for r in scored]
    return {"labels": [f"{r['claimed_at']:%m-%d %H:%M}" for r in scored],
            "score": [round(v, 4) for v in values],
            "rolling": [round(v, 4) for v in rules.rolling(values, window)]}


def _days(rows: Any, now: datetime) -> dict[str, list[Any]]:
    since = budget.day_start(now) - timedelta(days=DAYS - 1)
    found = {r["day"]: r for r in rows.filter(claimed_at__gte=since).annotate(
        day=TruncDate("claimed_at")).values("day").annotate(
        done=Count("pk", filter=Q(status="done")), error=Count("pk", filter=Q(status="error")),
        cost=Sum("cost_usd")).order_by("day")}
    days = [(since + timedelta(days=i)).date() for i in range(DAYS)]
    return {"labels": [f"{d:%m-%d}" for d in days],
            "done": [found.get(d, {}).get("done", 0) for d in days],
            "error": [found.get(d, {}).get("error", 0) for d in days],
            "cost": [round(found.get(d, {}).get("cost") or 0, 6) for d in days]}


def table(scorer: LiveScorer, user: Any) -> list[LiveScore]:
    return list(LiveScore.objects.visible_to(user).filter(scorer=scorer)
                .select_related("run").order_by("-pk")[:TABLE])


def overview(user: Any) -> dict[int, dict[str, Any]]:
    """Per scorer, over the visitor's visible runs: scored, errors (one query)."""
    return {r["scorer_id"]: r for r in LiveScore.objects.visible_to(user).values(
        "scorer_id").annotate(done=Count("pk", filter=Q(status="done")),
                              error=Count("pk", filter=Q(status="error")))}
