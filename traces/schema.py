"""The step: one typed record for everything an agent does (pure; JSON round-trip)."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

StepKind = Literal[
    "llm", "thought", "tool", "plan", "reflection", "evaluation", "node", "message", "final",
    "error", "user", "approval", "guardrail",
]
StepStatus = Literal["running", "ok", "error"]
STEP_KINDS: tuple[str, ...] = get_args(StepKind)
STEP_STATUSES: tuple[str, ...] = get_args(StepStatus)
RUN_STATUSES = (
    "queued", "running", "paused", "succeeded", "stopped", "failed", "cancelled", "timed_out",
    "interrupted",
)
# A run is active until it reaches one of the finished statuses; nothing leaves those.
ACTIVE_STATUSES = RUN_STATUSES[:3]
FINISHED_STATUSES = RUN_STATUSES[3:]
# Held by a process: it executes the run (a queued run is held by nobody yet).
HELD_STATUSES = ("running", "paused")
assert set(HELD_STATUSES) < set(ACTIVE_STATUSES)
# Finished with an answer: the agent's own, or one written from what it found when a limit
# stopped it ("stopped").
ANSWERED_STATUSES = ("succeeded", "stopped")
# Finished without one: an error, a person, the clock or a vanished process ended it.
UNANSWERED_STATUSES = tuple(s for s in FINISHED_STATUSES if s not in ANSWERED_STATUSES)
# What Resume may continue: every finished run but a succeeded one (a stopped run may go on
# past the limit that stopped it).
RESUMABLE_STATUSES = tuple(s for s in FINISHED_STATUSES if s != "succeeded")
# What each status means, in words (pages and the terminal show these).
RUN_STATUS_MEANINGS = {
    "queued": "waiting to start",
    "running": "running",
    "paused": "paused",
    "succeeded": "finished with the agent's answer",
    "stopped": "stopped by a limit and answered from what was found so far",
    "failed": "ended by an error or a limit, without an answer",
    "cancelled": "cancelled by a person",
    "timed_out": "ran out of time before an answer",
    "interrupted": "its process went away while it ran",
}
assert set(RUN_STATUS_MEANINGS) == set(RUN_STATUSES)
# A run's totals: what the runtime counts while it runs (agentlab.runtime.limits.Totals), the
# Run row's columns of the same names, and what every view of a finished run repeats (its
# status write, the live socket's state, a bundle, an OTLP root span).
RUN_TOTALS = ("llm_calls", "tool_calls", "tokens_in", "tokens_out", "cost_usd", "wall_ms",
              "format_errors", "reflections")


@dataclass(kw_only=True)
class Step:
    seq: int = 0  # assigned by the runtime: 1, 2, 3… per run, never reused
    kind: StepKind
    role: str = "agent"
    name: str = ""
    parent: int | None = None  # seq of the enclosing step
    input: Any = None
    output: Any = None
    text: str = ""
    status: StepStatus = "ok"
    started_at: float = field(default_factory=time.time)  # epoch seconds
    duration_ms: float | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A deep copy as plain data. Through JSON when it can (C speed: the recorder copies
        every version of every step), which is also the shape the database gives back."""
        data = {name: getattr(self, name) for name in _FIELD_NAMES}
        try:
            return json.loads(json.dumps(data))
        except (TypeError, ValueError):  # not JSON (a test's or a tool's object): copy as is
            return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Step:
        """Build a step from JSON, refusing unknown fields and bad kinds/statuses by name."""
        if not isinstance(data, dict):
            raise ValueError(f"a step must be an object, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        if unknown := sorted(set(data) - known):
            raise ValueError(f"unknown step field(s): {', '.join(unknown)}")
        if data.get("kind") not in STEP_KINDS:
            raise ValueError(
                f"step kind {data.get('kind')!r} is not one of {', '.join(STEP_KINDS)}"
            )
        if data.get("status", "ok") not in STEP_STATUSES:
            raise ValueError(f"step status {data.get('status')!r} is not one of "
                             f"{', '.join(STEP_STATUSES)}")
        if not isinstance(data.get("seq", 0), int) or isinstance(data.get("seq"), bool):
            raise ValueError("step seq must be an integer")
        if data.get("meta") is not None and not isinstance(data["meta"], dict):
            raise ValueError("step meta must be an object")
        if "meta" in data and data["meta"] is None:
            data = {**data, "meta": {}}
        return cls(**data)


_FIELD_NAMES = tuple(f.name for f in dataclasses.fields(Step))


def normalise_args(arguments: Any) -> str:
    """A stable key for a call's arguments: sorted keys, whitespace collapsed. The runtime's
    loop detector and the trace diff both use it, so "the same call" means one thing."""

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return " ".join(value.split())
        if isinstance(value, Mapping):
            return {str(k): clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [clean(v) for v in value]
        return value

    return json.dumps(clean(arguments), sort_keys=True, default=str)
