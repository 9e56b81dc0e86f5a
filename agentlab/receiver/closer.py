"""Open traces that go quiet end as interrupted (store.close_quiet), checked by a task that a
web process starts with the first spans it receives; a process that starts sweeps once too
(agentlab.hooks.sweep), so a trace left open by a process that stopped is closed as well."""

from __future__ import annotations

import asyncio
import logging

from django.conf import settings

from agentlab.receiver import store
from agentlab.runs import fanout
from agentlab.runs.writer import WRITER

log = logging.getLogger(__name__)

_TASKS: dict[asyncio.AbstractEventLoop, asyncio.Task[None]] = {}


def every_s() -> float:
    """How often to look: often enough that a trace ends within a quarter of its quiet time
    after it, at most every 30 s."""
    return max(0.05, min(30.0, settings.AGENTLAB_RECEIVER_QUIET_S / 4))


def ensure_running() -> None:
    """Start this loop's closer if it is not running."""
    loop = asyncio.get_running_loop()
    task = _TASKS.get(loop)
    if task is None or task.done():
        for gone in [lp for lp in _TASKS if lp.is_closed()]:
            _TASKS.pop(gone, None)
        _TASKS[loop] = loop.create_task(_close_quiet_forever(), name="receiver-closer")


async def _close_quiet_forever() -> None:
    while True:
        await asyncio.sleep(every_s())
        try:
            await close_quiet_now()
        except Exception:  # the database is away: try again next time
            log.exception("closing quiet received traces failed")


async def close_quiet_now() -> int:
    """Close the quiet traces now; how many."""
    events = await WRITER.call(store.close_quiet)
    for run_id, event in events:
        fanout.publish(run_id, event)
    return len(events)
