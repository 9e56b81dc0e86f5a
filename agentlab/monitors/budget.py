"""A judge's daily budget, in USD and in calls (UTC days). A claim reserves the most its call
can cost (`LiveScore.cost_usd` while it runs), and the actual cost replaces it when the reply
comes, so every process that scores for the scorer counts what the others have in flight."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.db.models import Sum

from agentlab.monitors.models import LiveScore, LiveScorer


def day_start(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def today(scorer: LiveScorer, now: datetime) -> tuple[float, int]:
    """(USD spent or reserved, calls made) by the scorer since midnight UTC."""
    got = LiveScore.objects.filter(scorer=scorer, claimed_at__gte=day_start(now)).aggregate(
        cost=Sum("cost_usd"), calls=Sum("calls"))
    return float(got["cost"] or 0), int(got["calls"] or 0)


def refusal(scorer: LiveScorer, cost: float, now: datetime) -> str:
    """Why one more call of at most `cost` USD may not be made today ("" : it may)."""
    if scorer.kind != "llm_judge" or (scorer.daily_budget_usd is None and
                                      scorer.daily_calls is None):
        return ""
    spent, calls = today(scorer, now)
    if scorer.daily_calls is not None and calls + 1 > scorer.daily_calls:
        return f"its daily limit of {scorer.daily_calls:,} calls is reached"
    if scorer.daily_budget_usd is not None and spent + cost > scorer.daily_budget_usd:
        return (f"its daily budget of ${scorer.daily_budget_usd:g} is reached "
                f"(${spent:.4f} spent; the next call could cost up to ${cost:.4f})")
    return ""


def pause(scorer: LiveScorer, why: str, now: datetime) -> None:
    """Pause the scorer until the next UTC midnight, saying why."""
    until = day_start(now) + timedelta(days=1)
    reason = f"Paused until {until:%Y-%m-%d %H:%M} UTC: {why}."[:300]
    LiveScorer.objects.filter(pk=scorer.pk).update(paused_until=until, paused_reason=reason)
    scorer.paused_until, scorer.paused_reason = until, reason
