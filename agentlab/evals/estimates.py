"""How long an experiment will take, from the runs its agents made before: what the start
form shows before anything starts (a 41 × 7 experiment is hours on a small machine)."""

from __future__ import annotations

from typing import Any

from django.db.models import Avg, Count

from agentlab.models import Agent
from traces.models import Run
from traces.schema import FINISHED_STATUSES

SMALL_CASES = 3  # the "small first experiment": this many cases of the suite


def agent_seconds(user: Any, agents: list[Agent]) -> dict[int, float | None]:
    """Mean wall time (s) of each agent's finished runs this user can see; None: no past run."""
    rows = (Run.objects.visible_to(user)
            .filter(agent__in=agents, status__in=FINISHED_STATUSES, wall_ms__isnull=False)
            .order_by().values("agent").annotate(ms=Avg("wall_ms"), n=Count("pk")))
    found = {row["agent"]: row["ms"] / 1000 for row in rows if row["n"]}
    return {agent.pk: found.get(agent.pk) for agent in agents}


def estimate(cases: int, seconds: list[float | None], concurrency: int) -> dict[str, Any]:
    """Runs (cases × agents) and, where every agent has past runs, the expected wall time with
    `concurrency` runs at a time."""
    runs = cases * len(seconds)
    known = [s for s in seconds if s is not None]
    total = sum(cases * s for s in known) / max(1, concurrency) if known else None
    return {"runs": runs, "seconds": total, "complete": len(known) == len(seconds),
            "text": describe(runs, total, len(known) == len(seconds))}


def describe(runs: int, seconds: float | None, complete: bool) -> str:
    what = f"{runs:,} run{'s' if runs != 1 else ''}"
    if seconds is None:
        return f"{what}; no past runs of these agents to estimate the time from"
    return (f"{what}, about {span(seconds)}{'' if complete else ' or more'} "
            "(from these agents' past runs)")


def span(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
