"""Issue 38: runs that share a busy model take turns, and the wait is not the agent's time.

A model endpoint that answers one request at a time (llama.cpp, the embedded model) is given at
most one request by this process (agentlab/llm/gate.py); the others wait their turn in order,
the wait is recorded on the llm step (meta.queued_ms, the run's totals.queued_ms) and is not
charged against the run's total timeout. Real paths: the scripted OpenAI-compatible server
(which here, like llama.cpp, serves one request at a time) and the real runtime."""

from __future__ import annotations

import asyncio
import threading
import time

from agentlab.llm.client import OpenAIChatModel
from agentlab.llm.types import ProfileConfig
from agentlab.runtime.limits import Limits
from agentlab.runtime.loop import execute
from tests.runtime_pieces import Scripted
from tests.scripted_model import make_context

CALL_S = 0.4  # what the server takes for one reply
CALLS = 4  # each run's model calls: alone a run needs CALLS × CALL_S = 1.6 s


class OneAtATime:
    """A server that, like llama.cpp's, answers one request at a time (the rest wait inside
    it); counts how many it held at once (`most`)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.now = self.most = 0
        self._lock, self._count = threading.Lock(), threading.Lock()

    def __call__(self, body: dict) -> str:
        with self._count:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            with self._lock:
                time.sleep(self.seconds)
        finally:
            with self._count:
                self.now -= 1
        return "ok"


def shared_model(fake_llm, limit: int = 1) -> OpenAIChatModel:
    profile = ProfileConfig(name="Busy", base_url=fake_llm.base_url, model="scripted-model",
                            retries=0, timeout_s=30)
    return OpenAIChatModel(profile, gate_limit=lambda _profile: limit)


async def calls(ctx, task: str) -> str:
    for i in range(CALLS):
        await ctx.llm("agent", [{"role": "user", "content": f"{task} {i}"}])
    return "done"


async def test_two_runs_on_a_one_at_a_time_model_each_finish_within_their_own_timeouts(
        fake_llm) -> None:
    """Together the two runs need the model for 3.2 s, one after the other, and each waits
    for the other's calls; the wait is not theirs, so a 2.4 s limit (1.6 s of their own)
    stops neither, and the server never had two requests at once."""
    fake_llm.responder = server = OneAtATime(CALL_S)
    contexts = [make_context(shared_model(fake_llm), limits=Limits(total_timeout_s=2.4))
                for _ in range(2)]
    outcomes = await asyncio.gather(*(execute(Scripted(calls), ctx, f"run {n}")
                                      for n, (ctx, _sink) in enumerate(contexts)))

    assert [o.status for o in outcomes] == ["succeeded", "succeeded"], [o.error for o in outcomes]
    assert server.most == 1  # the gate sent one request at a time
    queued = [o.totals.queued_ms for o in outcomes]
    # Each waited for the other's calls: about CALLS × CALL_S between them (the first call of
    # one run found the model free).
    assert sum(queued) > (2 * CALLS - 2) * CALL_S * 1000 * 0.8, queued
    for outcome, (_ctx, sink) in zip(outcomes, contexts, strict=True):
        llm = [s for s in sink.steps if s.kind == "llm"]
        assert len(llm) == CALLS and all(s.status == "ok" for s in llm)
        on_steps = sum(s.meta.get("queued_ms", 0) for s in llm)
        assert abs(on_steps - outcome.totals.queued_ms) < 5  # the step says how long it waited
        waited = [s for s in llm if s.meta.get("queued_ms", 0) > CALL_S * 1000 / 2]
        assert waited, [s.meta for s in llm]
        for step in waited:  # its duration is the model's time, not the queue's
            assert step.duration_ms < step.meta["queued_ms"] + CALL_S * 1000
            assert "waiting_for_model" not in step.meta  # finished: no longer waiting


async def test_a_waiting_call_is_shown_as_waiting_for_the_model(fake_llm) -> None:
    """While a call waits for its turn, its running llm step says so (what the live page
    shows as "waiting for the model"), with how many requests are ahead of it."""
    fake_llm.responder = OneAtATime(CALL_S)
    model = shared_model(fake_llm)
    first, _ = make_context(model)
    second, sink = make_context(model)

    async def one(ctx, task):
        await ctx.llm("agent", [{"role": "user", "content": task}])
        return "done"

    busy = asyncio.ensure_future(execute(Scripted(one), first, "first"))
    while not first.totals.llm_calls:  # the first run holds the model
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    outcome = await execute(Scripted(one), second, "second")
    await busy

    assert outcome.status == "succeeded"
    versions = [s for s in sink.events if s.kind == "llm"]
    waiting = [s for s in versions if "waiting_for_model" in s.meta]
    assert waiting and waiting[0].status == "running"
    assert waiting[0].meta["waiting_for_model"]["ahead"] == 1
    # Then the same step again without it, running (its turn came), then finished.
    after = versions[versions.index(waiting[0]) + 1]
    assert after.status == "running" and "waiting_for_model" not in after.meta
    assert versions[-1].status == "ok" and versions[-1].meta["queued_ms"] > 0


async def test_without_a_limit_requests_go_at_once(fake_llm) -> None:
    fake_llm.responder = server = OneAtATime(0.2)
    model = shared_model(fake_llm, limit=0)
    contexts = [make_context(model) for _ in range(2)]

    async def one(ctx, task):
        await ctx.llm("agent", [{"role": "user", "content": task}])
        return "done"

    outcomes = await asyncio.gather(*(execute(Scripted(one), ctx, "q") for ctx, _ in contexts))
    assert {o.status for o in outcomes} == {"succeeded"}
    assert server.most == 2 and all(o.totals.queued_ms == 0 for o in outcomes)


async def test_a_cancelled_wait_leaves_its_place_in_line(fake_llm) -> None:
    """A run cancelled while it waits for the model gives up its place; the next in line
    still gets the model."""
    fake_llm.responder = OneAtATime(0.3)
    model = shared_model(fake_llm)
    (a, _), (b, _), (c, _) = (make_context(model) for _ in range(3))

    async def one(ctx, task):
        await ctx.llm("agent", [{"role": "user", "content": task}])
        return "done"

    first = asyncio.ensure_future(execute(Scripted(one), a, "a"))
    while not a.totals.llm_calls:
        await asyncio.sleep(0.01)
    second = asyncio.ensure_future(execute(Scripted(one), b, "b"))
    third = asyncio.ensure_future(execute(Scripted(one), c, "c"))
    while not (b.totals.llm_calls and c.totals.llm_calls):
        await asyncio.sleep(0.01)
    b.cancel()
    results = await asyncio.gather(first, second, third)
    assert [r.status for r in results] == ["succeeded", "cancelled", "succeeded"]


async def test_the_model_is_served_in_the_order_its_callers_asked() -> None:
    """First come, first served: a chat question asked while an experiment's runs wait goes
    after those already waiting and before those that ask after it, not after all of them."""
    from agentlab.llm.gate import Gate

    gate, served = Gate(1), []

    async def ask(name: str) -> None:
        async with gate.held():
            served.append(name)
            await asyncio.sleep(0.01)

    tasks = []
    for name in ("run A", "run B", "chat", "run A again"):
        tasks.append(asyncio.ensure_future(ask(name)))
        await asyncio.sleep(0)  # each asks after the one before
    await asyncio.gather(*tasks)
    assert served == ["run A", "run B", "chat", "run A again"]
    assert gate.busy == 0 and gate.waiting == 0
