"""Pairs of runs to compare (pure): a fork or replay with the run it came from, and otherwise
two runs of the same question by different agents. The earlier run is A, the later B."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class RunFacts:
    pk: int
    question: str
    agent: str
    parent: int | None = None


def question_key(text: str) -> str:
    """Questions that differ only in case and spacing are the same question."""
    return " ".join(text.split()).casefold()


def pairs(runs: Iterable[RunFacts]) -> list[tuple[int, int]]:
    """Each run with its origin (when it has one), else with the latest earlier run of the
    same question by another agent; in order of the later run, each pair once."""
    found: list[tuple[int, int]] = []
    latest: dict[str, dict[str, int]] = {}  # question -> agent -> its latest run so far
    for run in sorted(runs, key=lambda r: r.pk):
        same = latest.setdefault(question_key(run.question), {})
        if run.parent is not None:
            found.append((run.parent, run.pk))
        else:
            others = [pk for agent, pk in same.items() if agent != run.agent]
            if others:
                found.append((max(others), run.pk))
        same[run.agent] = run.pk
    return list(dict.fromkeys(found))
