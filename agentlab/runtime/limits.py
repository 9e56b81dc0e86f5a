"""Budgets, running totals and the exceptions that end a run early (pure)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
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
    model_ms: float = 0.0  # time spent waiting on models; wall - model - tool = our overhead
    tool_ms: float = 0.0

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


@contextlib.contextmanager
def deadline_lifted(timeout: asyncio.Timeout | None) -> Iterator[None]:
    """Time spent waiting for a person (a pause, an approval) does not count towards the run's
    total timeout: the deadline is lifted while waiting and moved back by as long after, so a
    run nobody approves waits, visibly, instead of timing out."""
    when = timeout.when() if timeout is not None else None
    if timeout is None or when is None or timeout.expired():
        yield
        return
    loop = asyncio.get_running_loop()
    started = loop.time()
    timeout.reschedule(None)
    try:
        yield
    finally:
        if not timeout.expired():
            timeout.reschedule(when + (loop.time() - started))
