"""Waiting for state in tests: on a condition, with a deadline, never a bare sleep.

A sleep that "should be long enough" is either too short on a loaded machine (a flaky test) or
too long everywhere (a slow one). `wait_until` asks the condition again and again (sync: every
few milliseconds; async: every turn of the loop, with a short pause so the other tasks and
threads run) and fails with the condition's name once the deadline passes.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

DEADLINE_S = 10.0
_POLL_S = 0.005


class NotYet(AssertionError):
    """The condition did not come true before the deadline."""


def _what(predicate: Callable[[], Any], message: str | None) -> str:
    return message or getattr(predicate, "__name__", repr(predicate))


def wait_until(predicate: Callable[[], Any], timeout: float = DEADLINE_S,
               message: str | None = None) -> Any:
    """Block until `predicate()` is truthy (returns it); NotYet after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if value := predicate():
            return value
        if time.monotonic() > deadline:
            raise NotYet(f"not true within {timeout:g} s: {_what(predicate, message)}")
        time.sleep(_POLL_S)


async def await_until(predicate: Callable[[], Any | Awaitable[Any]],
                      timeout: float = DEADLINE_S, message: str | None = None) -> Any:
    """`wait_until` for async code: the loop keeps turning while it waits; `predicate` may be
    a coroutine function (a database read)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise NotYet(f"not true within {timeout:g} s: {_what(predicate, message)}")
        await asyncio.sleep(_POLL_S)


async def turns(n: int = 100) -> None:
    """Let the loop turn `n` times, no clock involved: every task that can go on without
    something outside the loop (a thread, a socket, a timer) does. For "nothing happens
    meanwhile" where only a person could make it happen."""
    for _ in range(n):
        await asyncio.sleep(0)
