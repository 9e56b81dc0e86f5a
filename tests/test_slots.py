"""Compute slots (agentlab/runtime/slots.py): a few runs compute at once, waits give the
slot back, and nothing can hold one long enough to stop the others. No clock: whether a run
got a slot or went on without one is what `holds_a_slot()` says inside it."""

from __future__ import annotations

import asyncio

from agentlab.runtime import slots


def holds_a_slot() -> bool:
    slot = slots._CURRENT.get()
    return slot is not None and slot.held


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

    async def paused_() -> None:
        async with slots.computing(1):
            async with slots.waiting():  # a checkpoint or an approval
                waiting.set()
                await answered.wait()
            finished.append("paused")

    async def other_() -> None:
        async with slots.computing(1):
            got.append(holds_a_slot())  # the slot itself, not a way round it
            finished.append("other")

    waiting, got = asyncio.Event(), []
    first = asyncio.create_task(paused_())
    await waiting.wait()
    await asyncio.wait_for(other_(), 10)
    answered.set()
    await first
    assert finished == ["other", "paused"] and got == [True]


async def test_a_run_holding_its_slot_while_it_sleeps_delays_the_others_only_a_little():
    holding, release = asyncio.Event(), asyncio.Event()

    async def hog() -> None:
        async with slots.computing(1):
            holding.set()
            await release.wait()  # a wait the module does not know of

    task = asyncio.create_task(hog())
    await holding.wait()

    async def other() -> bool:
        async with slots.computing(1):
            return holds_a_slot()

    # It goes on without a slot (after PATIENCE_S) while the hog still holds the only one.
    assert await asyncio.wait_for(other(), 10) is False
    assert not task.done()
    release.set()
    await task


async def test_a_cancelled_run_gives_its_slot_back():
    computing = asyncio.Event()

    async def cancelled() -> None:
        async with slots.computing(1):
            computing.set()
            await asyncio.Event().wait()  # cancelled while it holds the slot

    task = asyncio.create_task(cancelled())
    await computing.wait()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    async with slots.computing(1):
        assert holds_a_slot()  # the slot itself: it was given back, not waited out


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
