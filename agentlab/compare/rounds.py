"""Creating a comparison and its rounds: one run per agent, launched together. Every round's
runs are the comparison owner's (whoever asked for the re-run), and count towards that user's
runs going at once (`runs.start.start_runs`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction

from agentlab.compare.models import MIN_AGENTS, Comparison, ComparisonEntry
from agentlab.models import Agent
from agentlab.runs import engine, start
from traces.models import Run


@transaction.atomic
def new_round(comparison: Comparison, agents: Sequence[Agent]) -> list[Run]:
    """Create (not launch) one queued run per agent as the comparison's next round, owned by
    the comparison's owner; RunLimit when that user has no room for them all."""
    number = comparison.last_round + 1
    # Claimed by this process at once, so a socket's "start" cannot launch one a second time.
    runs = start.start_runs(comparison.user, agents, comparison.question, claim=True)
    for position, (agent, run) in enumerate(zip(agents, runs, strict=True)):
        ComparisonEntry.objects.create(comparison=comparison, round=number, position=position,
                                       agent=agent, run=run)
    return runs


@transaction.atomic
def create_comparison(user: Any, question: str, agents: Sequence[Agent],
                      title: str = "") -> tuple[Comparison, list[Run]]:
    comparison = Comparison.objects.create(user=user, question=question, title=title)
    return comparison, new_round(comparison, agents)


def rerun_agents(comparison: Comparison) -> list[Agent]:
    """The agents of the latest round that still exist, in their column order."""
    entries = comparison.entries.filter(round=comparison.last_round, agent__isnull=False)
    agents = [e.agent for e in entries.select_related("agent").order_by("position")]
    if len(agents) < MIN_AGENTS:
        raise ValueError(f"Only {len(agents)} of this comparison's agents still exist; "
                         f"a comparison needs at least {MIN_AGENTS}.")
    return agents


async def launch_all(runs: Sequence[Run]) -> None:
    """Start every run (as a task of daphne's loop, or on the workers: agentlab/runs/engine.py):
    they run concurrently, each under a live.RunControl so its column and run page can pause, step
    and cancel it."""
    for run in runs:
        await engine.submit(run)


def round_entries(comparison: Comparison, number: int) -> list[ComparisonEntry]:
    return list(comparison.entries.filter(round=number).select_related("run", "agent"))
