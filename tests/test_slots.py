"""Compute slots (agentlab/paradigms/slots.py): a few runs compute at once, waits give the
slot back, and nothing can hold one long enough to stop the others."""

from __future__ import annotations

import asyncio
import time

from agentlab.runtime import slots


async def test_no_more_runs_compute_at_once_than_there_are_slots():
    computing, most = 0, 0

    async def run() -> None:
        nonlocal computing, most
        async with slots.computing(2):
            for _ in range(5):
                computing += 1
                most = max(most, computing)
                await asyncio.sleep(0)  # a turn of the loop without a wait: the slot stays
                computing -= 1
                async with slots.waiting():  # the model or a tool: the slot is handed on
                    await asyncio.sleep(0.001)

    await asyncio.wait_for(asyncio.gather(*(run() for _ in range(8))), 10)
    assert most == 2


async def test_a_run_waiting_for_a_person_lets_the_others_compute():
    answered = asyncio.Event()
    finished = []

    async def paused() -> None:
        async with slots.computing(1):
            async with slots.waiting():  # a checkpoint or an approval
                await answered.wait()
            finished.append("paused")

    async def other() -> None:
        async with slots.computing(1):
            finished.append("other")

    first = asyncio.create_task(paused())
    await asyncio.sleep(0.01)
    await asyncio.wait_for(other(), 0.05)  # well within the patience of a slot
    answered.set()
    await first
    assert finished == ["other", "paused"]


async def test_a_run_holding_its_slot_while_it_sleeps_delays_the_others_only_a_little():
    async def hog() -> None:
        async with slots.computing(1):
            await asyncio.sleep(1)  # a wait the module does not know of

    task = asyncio.create_task(hog())
    await asyncio.sleep(0.01)
    started = time.monotonic()
    async with slots.computing(1):
        waited = time.monotonic() - started
    assert waited < 0.5 and not task.done()
    task.cancel()


async def test_a_cancelled_run_gives_its_slot_back():
    async def cancelled() -> None:
        async with slots.computing(1), slots.waiting():
            await asyncio.sleep(10)

    task = asyncio.create_task(cancelled())
    await asyncio.sleep(0.01)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    started = time.monotonic()
    async with slots.computing(1):
        assert time.monotonic() - started < slots.PATIENCE_S / 2  # free at once


async def test_a_slot_is_free_only_while_no_run_waits_for_one():
    assert not slots.free()  # outside a run nobody can tell
    held, go_on = asyncio.Event(), asyncio.Event()
    seen = []

    async def first() -> None:
        async with slots.computing(1):
            seen.append(slots.free())  # holding the only slot: none free
            async with slots.waiting():
                seen.append(slots.free())  # handed back, nobody else waiting
                held.set()
                await go_on.wait()

    task = asyncio.create_task(first())
    await held.wait()
    async with slots.computing(1), slots.waiting():
        pass
    go_on.set()
    await task
    assert seen == [False, True]
