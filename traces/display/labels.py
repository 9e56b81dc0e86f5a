"""The words a page uses for a run's status and a paradigm's key (pure).

A status is said as what happened to the question ("finished with an answer", "stopped by a
limit", "failed"), not as the raw value; a status this file does not know yet (a newer
schema, an imported run) reads as its value with spaces. Paradigm names come from whoever
knows them (the agentlab app registers its paradigm registry at start-up): traces never
imports agentlab, so an imported run of an unknown paradigm still reads as its key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

STATUS_WORDS: dict[str, str] = {
    "queued": "queued",
    "running": "running",
    "paused": "paused",
    "succeeded": "finished with an answer",
    "stopped": "stopped by a limit",
    "failed": "failed",
    "cancelled": "cancelled",
    "timed_out": "stopped by its time limit",
    "interrupted": "interrupted",
}
# What each status means, for a tooltip and the trace header.
STATUS_HELP: dict[str, str] = {
    "queued": "waiting to start",
    "running": "working on it now",
    "paused": "waiting for you (step mode, a breakpoint or an approval)",
    "succeeded": "the agent gave an answer; whether it is right is for a score or you to say",
    "stopped": "a limit (steps, calls, tokens, a loop) stopped it; it answered with what it had",
    "failed": "it ended with an error and no answer",
    "cancelled": "someone cancelled it",
    "timed_out": "its total time limit ran out",
    "interrupted": "the process running it stopped; resume continues from its last step",
}

_paradigm_names: list[Callable[[str], str | None]] = []
# Who can say how a run's answer scored (the evals app: a run that answered a case).
_score_sources: list[Callable[[int], list[dict[str, Any]]]] = []


def status_word(status: str | None) -> str:
    status = str(status or "")
    return STATUS_WORDS.get(status) or status.replace("_", " ") or "unknown"


def status_help(status: str | None) -> str:
    return STATUS_HELP.get(str(status or ""), "")


def register_paradigm_names(lookup: Callable[[str], str | None]) -> None:
    """`lookup(key)` gives a paradigm's display name, or None when it does not know it."""
    if lookup not in _paradigm_names:
        _paradigm_names.append(lookup)


def paradigm_name(key: str | None) -> str:
    key = str(key or "")
    if not key:
        return "?"
    for lookup in _paradigm_names:
        if name := lookup(key):
            return name
    return key.replace("_", " ")


def register_scores(lookup: Callable[[int], list[dict[str, Any]]]) -> None:
    """`lookup(run_id)` gives the run's scores: [{"text", "level", "url", "title"}]."""
    if lookup not in _score_sources:
        _score_sources.append(lookup)


def scores(run_id: int) -> list[dict[str, Any]]:
    """How the run's answer scored, where anyone knows (shown next to its status)."""
    return [s for lookup in _score_sources for s in lookup(run_id)]


def score_level(score: float) -> str:
    return "high" if score >= 0.8 else "mid" if score >= 0.4 else "low"
