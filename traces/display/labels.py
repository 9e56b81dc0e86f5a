"""The words a page uses for a run's status and a paradigm's key.

A status is said as what happened to the question ("finished with an answer", "stopped by a
limit", "failed"), not as the raw value; a status this file does not know yet (a newer
schema, an imported run) reads as its value with spaces. Paradigm names come from the
`paradigm_name` hook (traces/hooks.py): traces never imports agentlab, so an imported run of an
unknown paradigm still reads as its key.
"""

from __future__ import annotations

from typing import Any

from traces.hooks import hook

STATUS_WORDS: dict[str, str] = {
    "queued": "queued",
    "running": "running",
    "paused": "paused",
    "succeeded": "finished with an answer",
    "stopped": "stopped by a limit",
    "failed": "failed",
    "cancelled": "cancelled",
    "timed_out": "timed out",
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
    "timed_out": "it ran out of time before an answer: its total time limit, or a model call's "
                 "timeout (a limit that still let it answer from what it found is "
                 "\"stopped by a limit\")",
    "interrupted": "the process running it stopped; resume continues from its last step",
}



def status_word(status: str | None) -> str:
    status = str(status or "")
    return STATUS_WORDS.get(status) or status.replace("_", " ") or "unknown"


def status_help(status: str | None) -> str:
    return STATUS_HELP.get(str(status or ""), "")


def paradigm_name(key: str | None) -> str:
    key = str(key or "")
    if not key:
        return "?"
    lookup = hook("paradigm_name")
    return (lookup(key) if lookup else None) or key.replace("_", " ")


def scores(run_id: int) -> list[dict[str, Any]]:
    """How the run's answer scored, where anyone knows (shown next to its status)."""
    lookup = hook("run_scores")  # [{"text", "level", "url", "title"}]
    return lookup(run_id) if lookup else []


def score_level(score: float) -> str:
    return "high" if score >= 0.8 else "mid" if score >= 0.4 else "low"
