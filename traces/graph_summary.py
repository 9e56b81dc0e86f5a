"""The graph of a long finished run as a stored aggregate, so its page never reads every step.

The aggregate is what traces/graph_query.groups answers (the steps grouped by their own, their
parent's and their grandparent's facts, with their figures), kept in RunGraph. It is summed
once, as an import finishes (traces/bundle_store) or on the first view of a long finished run,
and read as one row after that, however long the run. A run that is still going is grouped
live each time (its steps change), and a short run keeps today's cache (traces/graph_query).
The thresholds are the timeline's (traces/timeline_summary): past SUMMED_FROM steps.
"""

from __future__ import annotations

from typing import Any

from traces.graph import Facts, Figures, Group
from traces.models import Run, RunGraph
from traces.timeline_summary import SUMMED_FROM


def summed(run: Run) -> bool:
    """Whether this run's graph comes from the stored aggregate."""
    return not run.is_active and run.step_count > SUMMED_FROM


def load(run: Run) -> tuple[list[Group], bool] | None:
    """The stored groups, if they were summed at the run's present length and status."""
    found = RunGraph.objects.filter(run=run, steps=run.step_count, status=run.status).values_list(
        "groups", "cut").first()
    if found is None:
        return None
    return [_group(g) for g in found[0]], found[1]


def save(run: Run, found: list[Group], cut: bool) -> None:
    RunGraph.objects.update_or_create(run=run, defaults={
        "steps": run.step_count, "status": run.status, "cut": cut,
        "groups": [_row(g) for g in found]})


def _row(group: Group) -> list[Any]:
    f = group.figures
    return [_facts_row(group.step), _facts_row(group.parent), _facts_row(group.grandparent),
            [f.count, f.ms, f.tokens_in, f.tokens_out, f.cost_usd, f.errors, f.first]]


def _facts_row(facts: Facts | None) -> list[Any] | None:
    return None if facts is None else [facts.kind, facts.role, facts.name, facts.depth]


def _group(row: list[Any]) -> Group:
    step, parent, grand, figures = row
    return Group(_facts(step), _facts(parent), _facts(grand), Figures(*figures))  # type: ignore[arg-type]


def _facts(row: list[Any] | None) -> Facts | None:
    return None if row is None else Facts(*row)
