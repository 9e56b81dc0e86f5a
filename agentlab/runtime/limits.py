"""Budgets, running totals and the exceptions that end a run early (pure)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal


@dataclass
class Limits:
    max_steps: int = 40
    max_llm_calls: int = 25
    total_timeout_s: float = 120.0
    tool_timeout_s: float = 30.0
    token_budget: int | None = None  # prompt + completion tokens over the whole run
    max_repeats: int = 3  # the same tool call this many times in a row is a loop


@dataclass
class Totals:
    llm_calls: int = 0
    tool_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    wall_ms: float = 0.0
    format_errors: int = 0
    reflections: int = 0
    model_ms: float = 0.0  # time the models spent answering; wall - model - tool - queued
    tool_ms: float = 0.0  # = our overhead (and the time a person took: pauses, approvals)
    queued_ms: float = 0.0  # time waiting for a busy model's turn (llm/gate.py): not charged

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class BudgetExceeded(Exception):
    """A limit of the run was reached; the run ends with a partial answer."""

    def __init__(self, reason: str, status: Literal["failed", "timed_out"] = "failed") -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


class IterationLimit(BudgetExceeded):
    """A paradigm's own loop ran out (ReAct's max_iterations): in a sub-run the caller may
    catch it and go on; at the top it ends the run like any limit."""


class LoopDetected(Exception):
    """The agent repeated the same tool call `max_repeats` times in a row."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RunCancelled(Exception):
    """The user cancelled the run."""


@dataclass
class _Lift:
    when: float  # the deadline when the first wait began
    since: float  # when it began
    waits: int = 0  # waits going on now (a run's parallel branches may wait at once)


_LIFTS: weakref.WeakKeyDictionary[asyncio.Timeout, _Lift] = weakref.WeakKeyDictionary()


@contextlib.contextmanager
def deadline_lifted(timeout: asyncio.Timeout | None) -> Iterator[None]:
    """Time spent waiting for a person (a pause, an approval) or for a busy model's turn does
    not count towards the run's total timeout: the deadline is lifted while waiting and moved
    back by as long after, so a run nobody approves waits, visibly, instead of timing out.
    Overlapping waits (parallel branches of one run) lift it once, for as long as any lasts."""
    lift = _LIFTS.get(timeout) if timeout is not None else None
    if lift is None:
        when = timeout.when() if timeout is not None else None
        if timeout is None or when is None or timeout.expired():
            yield
            return
        lift = _LIFTS[timeout] = _Lift(when, asyncio.get_running_loop().time())
        timeout.reschedule(None)
    lift.waits += 1
    try:
        yield
    finally:
        lift.waits -= 1
        if not lift.waits:
            del _LIFTS[timeout]
            if not timeout.expired():
                timeout.reschedule(lift.when + (asyncio.get_running_loop().time() - lift.since))
