"""The recorder's writer (agentlab/runs/writer.py), on a Writer of the test's own.

Why a fresh Writer and not the process's WRITER: what a user relies on — a step's row is
written before anyone is told, a bad row fails alone, a run's status follows its steps, a
run's end is never forgotten when the database comes back — is the writer's own bookkeeping,
and a Writer made by the test is built while mutation testing can still change how.
"""

from __future__ import annotations

import asyncio
import functools
import threading

import pytest
from asgiref.sync import sync_to_async
from django.db import IntegrityError

from agentlab.runs.recorder import FENCE, Recorder, mark_failed, save_status
from agentlab.runs.writer import RETRY_LATER_TRIES, Fence, TakenOver, Writer
from tests.waiting import await_until
from traces.models import Run, Step
from traces.schema import Step as StepRecord

pytestmark = pytest.mark.django_db(transaction=True)


class Owner:
    """The recorder side of a job: its run, and which of its seqs already have a row."""

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        self._saved: set[int] = set()

    def saved(self) -> set[int]:
        return self._saved


async def a_run(user, **fields) -> Run:
    return await Run.objects.acreate(user=user, input="What is 2+2?", agent_name="t",
                                     paradigm="react", **fields)


def tool_step(seq: int, status: str = "ok", text: str = "4") -> StepRecord:
    return StepRecord(seq=seq, kind="tool", name="calculator", status=status, text=text,
                      input={"expression": "2+2"})


async def rows(run: Run) -> list[tuple[int, str, str]]:
    return [(r.seq, r.status, r.text) async for r in Step.objects.filter(run=run).order_by("seq")]


async def test_a_step_is_committed_before_its_caller_is_told_and_then_runs_first(user):
    writer = Writer()
    run = await a_run(user)
    owner = Owner(run.pk)
    told: list[tuple[object, bool, bool, int]] = []
    future: asyncio.Future | None = None

    def then(error, superseded):  # the recorder publishes from here, on the run's loop
        told.append((error, superseded, future.done(), threading.get_ident()))

    future = writer.step(owner, tool_step(1), then=then)
    assert await asyncio.wait_for(future, 10) is None
    # `then` ran on the caller's thread, before the caller's future settled.
    assert told == [(None, False, False, threading.get_ident())]
    assert await rows(run) == [(1, "ok", "4")]
    assert owner.saved() == {1}
    await run.arefresh_from_db()
    assert run.step_count == 1

    # The same seq again is the same row: replaced, not counted twice.
    await asyncio.wait_for(writer.step(owner, tool_step(1, text="four")), 10)
    assert await rows(run) == [(1, "ok", "four")]
    await run.arefresh_from_db()
    assert run.step_count == 1


async def test_the_writer_thread_starts_with_the_first_job_and_does_not_keep_the_process(user):
    before = {t.ident for t in threading.enumerate()}
    writer = Writer()
    assert {t.ident for t in threading.enumerate()} == before  # nothing until a job comes
    assert await asyncio.wait_for(writer.call(lambda: 42), 10) == 42
    started = [t for t in threading.enumerate() if t.ident not in before]
    assert [(t.name, t.daemon) for t in started] == [("agentlab-recorder", True)]
    assert await asyncio.wait_for(writer.call(lambda a, b: a + b, 2, 3), 10) == 5
    # One thread serves every later job.
    assert [t for t in threading.enumerate() if t.ident not in before] == started


async def test_a_batch_keeps_order_writes_each_seq_once_and_runs_calls_after_the_steps(user):
    writer = Writer()
    run = await a_run(user)
    owner = Owner(run.pk)
    gate = threading.Event()
    held = writer.call(gate.wait, 30)  # everything below waits and goes as one batch
    told: list[tuple[str, object, bool]] = []

    def then_of(name):
        return lambda error, superseded: told.append((name, error, superseded))

    running = writer.step(owner, tool_step(1, status="running", text=""), then=then_of("running"))
    done = writer.step(owner, tool_step(1), then=then_of("done"))
    second = writer.step(owner, tool_step(2), then=then_of("second"))
    seen_by_status: list = []

    def status():  # a run's status is written after the steps handed over before it
        seen_by_status.extend(Step.objects.filter(run=run).order_by("seq")
                              .values_list("seq", "status"))
        return "status written"

    status_written = writer.call(status)
    gate.set()
    assert await asyncio.wait_for(asyncio.gather(held, running, done, second, status_written),
                                  10) == [True, None, None, None, "status written"]
    assert told == [("running", None, True), ("done", None, False), ("second", None, False)]
    assert seen_by_status == [(1, "ok"), (2, "ok")]
    assert await rows(run) == [(1, "ok", "4"), (2, "ok", "4")]
    await run.arefresh_from_db()
    assert run.step_count == 2


async def test_a_row_that_cannot_be_written_fails_alone_and_its_caller_hears_why(user):
    writer = Writer()
    run, gone = await a_run(user), await a_run(user)
    owner, gone_owner = Owner(run.pk), Owner(gone.pk)
    await gone.adelete()
    gate = threading.Event()
    held = writer.call(gate.wait, 30)
    told: list = []
    bad = writer.step(gone_owner, tool_step(1), then=lambda e, s: told.append(("bad", e, s)))
    good = writer.step(owner, tool_step(1), then=lambda e, s: told.append(("good", e, s)))
    after = writer.call(lambda: Step.objects.filter(run=run).count())
    gate.set()
    outcomes = await asyncio.wait_for(asyncio.gather(held, bad, good, after,
                                                     return_exceptions=True), 10)
    assert outcomes[0] is True
    assert isinstance(outcomes[1], IntegrityError)
    assert outcomes[2:] == [None, 1]  # the good row landed although its batch failed once
    assert [(name, type(error).__name__ if error else None) for name, error, _ in told] == [
        ("bad", "IntegrityError"), ("good", None)]
    assert gone_owner.saved() == set() and owner.saved() == {1}
    # The thread goes on serving.
    assert await asyncio.wait_for(writer.call(lambda: "still here"), 10) == "still here"


async def test_a_failed_call_alone_is_its_own_error_and_the_thread_survives_anything(
        user, caplog):
    writer = Writer()

    class Fatal(BaseException):  # not an Exception: escapes the per-job retry
        pass

    def boom():
        raise Fatal("the batch itself broke")

    with pytest.raises(ValueError, match="bad value"):
        await asyncio.wait_for(writer.call(int, "bad value"), 10)
    with pytest.raises(Fatal):
        await asyncio.wait_for(writer.call(boom), 10)
    assert await asyncio.wait_for(writer.call(lambda: "next batch"), 10) == "next batch"
    assert [r.getMessage() for r in caplog.records if r.name == "agentlab.runs.writer"] == [
        "the recorder's writer failed a batch"]


async def test_a_then_that_raises_does_not_keep_the_caller_from_its_outcome(user, caplog):
    writer = Writer()
    run = await a_run(user)

    def broken(error, superseded):
        raise RuntimeError("publishing failed")

    assert await asyncio.wait_for(writer.step(Owner(run.pk), tool_step(1), then=broken),
                                  10) is None
    assert await rows(run) == [(1, "ok", "4")]
    assert [r.getMessage() for r in caplog.records if r.name == "agentlab.runs.writer"] == [
        f"after writing step 1 of run {run.pk}"]


async def test_a_caller_that_stopped_waiting_does_not_keep_the_others_from_their_outcome(user):
    writer = Writer()
    gate = threading.Event()
    held = writer.call(gate.wait, 30)
    gone = writer.call(lambda: "nobody reads this")
    gone.cancel()  # its caller gave up (a timeout) before the writer got to it
    waiting = writer.call(lambda: "still told")
    gate.set()
    assert await asyncio.wait_for(waiting, 10) == "still told"
    assert await held is True


async def test_a_caller_whose_loop_is_gone_does_not_stop_the_writer(user):
    writer = Writer()
    gate = threading.Event()
    held = writer.call(gate.wait, 30)

    def hand_over_and_leave():  # a loop that hands a job over and closes before it is done
        async def submit():
            writer.call(lambda: "nobody waits for this")
        asyncio.run(submit())

    await sync_to_async(hand_over_and_leave, thread_sensitive=False)()
    gate.set()
    assert await asyncio.wait_for(held, 10) is True
    assert await asyncio.wait_for(writer.call(lambda: "served"), 10) == "served"


async def test_a_write_kept_for_later_runs_once_the_database_writes_again(user):
    """The recorder's last resort for a run's end: retried after each batch that commits
    until it succeeds, then never again."""
    writer = Writer()
    run = await a_run(user, status="running")
    attempts: list[int] = []

    def mark_failed(run_id, fail_times):
        attempts.append(run_id)
        if len(attempts) <= fail_times:
            raise RuntimeError("database still down")
        Run.objects.filter(pk=run_id).update(status="failed")

    writer.retry_later(mark_failed, run.pk, 2)
    assert attempts == []  # not before the database has written something
    for expected in (1, 2, 3):  # once after each batch that commits
        await asyncio.wait_for(writer.call(lambda: None), 10)
        await await_until(lambda n=expected: len(attempts) == n)  # it runs after the batch
        assert attempts == [run.pk] * expected
    # Its transaction commits just after the third try began.
    await await_until(Run.objects.filter(pk=run.pk, status="failed").aexists)
    for _ in range(2):  # the second batch starts only after the first one's retries
        await asyncio.wait_for(writer.call(lambda: None), 10)
    assert len(attempts) == 3  # done: not run again


async def test_a_write_kept_for_later_waits_for_a_batch_that_commits_and_gives_up_in_time(
        user, caplog):
    writer = Writer()
    attempts: list[int] = []

    def never(n):
        attempts.append(n)
        raise RuntimeError("still down")

    def failing():
        raise RuntimeError("the database is down")

    writer.retry_later(never, 7)
    with pytest.raises(RuntimeError):
        await asyncio.wait_for(writer.call(failing), 10)
    entered, gate = threading.Event(), threading.Event()

    def hold():  # the next batch: it starts only once the failed one's retries are done
        entered.set()
        gate.wait(10)

    held = writer.call(hold)
    await await_until(entered.is_set)
    assert attempts == []  # a batch that failed does not mean the database writes again
    gate.set()
    await asyncio.wait_for(held, 10)
    for _ in range(RETRY_LATER_TRIES + 3):
        await asyncio.wait_for(writer.call(lambda: None), 10)
    assert attempts == [7] * RETRY_LATER_TRIES
    gave_up = [r for r in caplog.records if r.getMessage().startswith("gave up")]
    assert [r.getMessage() for r in gave_up] == [f"gave up after {RETRY_LATER_TRIES} tries: "
                                                 "never(7,)"]


class FencedOwner(Owner):
    """A worker's run (agentlab.workers.job): written only while `Run.worker` is the fence's."""

    def __init__(self, run_id: int, fence: Fence) -> None:
        super().__init__(run_id)
        self.fence = fence


async def test_a_fenced_run_is_written_only_while_it_is_still_this_executions(user):
    """Once another execution claimed the run (another worker took it over: `Run.worker`
    names it), this one's rows and statuses are refused with TakenOver, its fence is told,
    and nothing of it is written; another run's row in the same batch is."""
    writer = Writer()
    lost: list[tuple[int, str]] = []
    fence = Fence("engine:me#1", lost=lambda run_id, why: lost.append((run_id, why)))
    run = await a_run(user, worker="engine:me#1", status="running")
    other = await a_run(user)
    owner = FencedOwner(run.pk, fence)
    await writer.step(owner, tool_step(1))
    assert await rows(run) == [(1, "ok", "4")] and not lost

    await Run.objects.filter(pk=run.pk).aupdate(worker="engine:them#2")  # taken over
    refused = writer.step(owner, tool_step(1, text="5"))
    fine = writer.step(Owner(other.pk), tool_step(1))
    with pytest.raises(TakenOver, match="engine:them#2"):
        await refused
    await fine
    assert await rows(run) == [(1, "ok", "4")] and len(await rows(other)) == 1
    assert [run_id for run_id, _why in lost] == [run.pk]
    assert (await Run.objects.aget(pk=run.pk)).step_count == 1

    with pytest.raises(TakenOver):
        await writer.call(functools.partial(save_status, fence=fence), run.pk, "failed",
                          {"error": "late"})
    assert await sync_to_async(mark_failed)(run.pk, "succeeded", "late", fence=fence) == 0
    after = await Run.objects.aget(pk=run.pk)
    assert (after.status, after.error, after.worker) == ("running", "", "engine:them#2")


async def test_a_recorder_made_under_a_fence_checks_it_before_each_step(user):
    """A worker's lease that lapsed stops the run before its step is written or shown."""
    run = await a_run(user, worker="engine:me#1", status="running")

    def lapsed() -> None:
        raise TakenOver("the lease lapsed")

    token = FENCE.set(Fence("engine:me#1", check=lapsed))
    try:
        recorder = Recorder(run.pk, publish=False)
    finally:
        FENCE.reset(token)
    assert Recorder(run.pk).fence is None  # made outside: not fenced
    with pytest.raises(TakenOver):
        await recorder.step(tool_step(1))
    assert await rows(run) == []
