"""Compute slots: how many runs of one event loop may compute at the same time.

Runs share the loop with the WebSockets that show them. A run computes between its waits (on
the model, a tool, its step's row, a pause); when twenty runs are ready at once, each turn of
the loop runs all of them before it delivers a frame, and a recorded step waits behind twenty
runs' work on its way to the browser. A run holds a slot while it computes and hands it back
for every wait, so only a few compute in each turn and frames go out between them; the runs'
total speed is the same (the loop was saturated either way). Measured by `manage.py
bench_live`; where runs mostly wait on a real model, nobody waits for a slot.

A slot is a soft limit: a run that waits longer than `PATIENCE_S` for one goes on without it,
so a wait this module does not know about (a run holding its slot while it sleeps) slows the
others at most that long, and never stops them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import weakref
from collections.abc import AsyncIterator
from contextvars import ContextVar
from dataclasses import dataclass

SLOTS = int(os.environ.get("AGENTLAB_COMPUTE_SLOTS", "3"))  # 0: no limit
PATIENCE_S = 0.1

_GATES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary())


@dataclass
class _Slot:
    gate: asyncio.Semaphore
    held: bool = False

    async def take(self) -> None:
        try:
            await asyncio.wait_for(self.gate.acquire(), PATIENCE_S)
        except TimeoutError:
            return  # go on without one (see the module's docstring)
        self.held = True

    def give_back(self) -> None:
        if self.held:
            self.held = False
            self.gate.release()


# The slot of the run this task belongs to; the tasks a run starts (parallel tool calls,
# members of a multi-agent run) share it.
_CURRENT: ContextVar[_Slot | None] = ContextVar("agentlab_compute_slot", default=None)


def _gate(slots: int) -> asyncio.Semaphore:
    gates = _GATES.setdefault(asyncio.get_running_loop(), {})
    if (gate := gates.get(slots)) is None:
        gate = gates[slots] = asyncio.Semaphore(slots)
    return gate


def free() -> bool:
    """Whether this task's run could compute at once: a slot is free and no run waits for
    one (False outside a run, or with slots off: then nobody can tell)."""
    slot = _CURRENT.get()
    return slot is not None and not slot.gate.locked()


@contextlib.asynccontextmanager
async def computing(slots: int | None = None) -> AsyncIterator[None]:
    """Around a whole run: take a slot now, give it back at the end (and for every wait)."""
    slots = SLOTS if slots is None else slots
    if slots <= 0:
        yield
        return
    slot = _Slot(_gate(slots))
    token = _CURRENT.set(slot)
    try:
        await slot.take()
        yield
    finally:
        slot.give_back()
        _CURRENT.reset(token)


@contextlib.asynccontextmanager
async def waiting() -> AsyncIterator[None]:
    """Around an await that waits on something else (model, tool, database, a person)."""
    slot = _CURRENT.get()
    if slot is None or not slot.held:
        yield
        return
    slot.give_back()
    ending = False
    try:
        yield
    except asyncio.CancelledError:
        ending = True  # the run is ending: no slot to take back
        raise
    finally:
        if not ending and not slot.held:  # a task sharing the slot may have it back already
            await slot.take()
