"""The recorder: persist, then publish; upsert by seq; runs left by a dead process."""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.db import IntegrityError
from django.utils import timezone

from agentlab.runs import fanout
from agentlab.runs.recorder import Recorder, mark_interrupted
from tests.factories import new_run
from tests.waiting import await_until, turns
from traces.models import Run, Step
from traces.owners import parse_process_id, process_id
from traces.schema import Step as StepRecord


async def watched_run(user):
    """A run, its recorder, and `heard(timeout)`: the next event a watcher of it in this
    process gets (the way its sockets hear it)."""
    run = await sync_to_async(new_run)(user)
    events: asyncio.Queue = asyncio.Queue()
    fanout.subscribe(run.pk, events.put_nowait)
    return run, Recorder(run.pk), lambda timeout=2: asyncio.wait_for(events.get(), timeout)


@pytest.mark.django_db(transaction=True)
async def test_each_step_is_in_the_database_before_it_is_published(user):
    run, recorder, heard = await watched_run(user)

    await recorder.step(StepRecord(seq=1, kind="llm", name="m", status="running"))
    message = await heard()
    assert message["type"] == "run.step" and message["seq"] == 1
    # When the browser hears of a step, a reconnecting one can already read it back.
    row = await Step.objects.aget(run=run, seq=1)
    assert row.status == "running"

    await recorder.step(StepRecord(seq=1, kind="llm", name="m", status="ok", tokens_in=12,
                                   output={"text": "4"}))
    await heard()
    row = await Step.objects.aget(run=run, seq=1)
    assert (row.status, row.tokens_in, row.output) == ("ok", 12, {"text": "4"})
    await run.arefresh_from_db()
    assert run.step_count == 1  # an upsert of the same seq is still one step

    await recorder.token(2, "Fo")
    assert (await heard())["delta"] == "Fo"


@pytest.mark.django_db(transaction=True)
async def test_concurrent_runs_steps_are_written_together_and_arrive_in_each_runs_order(user):
    watched = [await watched_run(user) for _ in range(5)]
    prompt = {"messages": [{"role": "user", "content": "What is 2+2?"}]}

    async def record(recorder):
        for seq in range(1, 11):
            await recorder.step(StepRecord(seq=seq, kind="llm", name="m", status="running",
                                           input=prompt))
            await recorder.token(seq, f"t{seq}")

    await asyncio.gather(*(record(recorder) for _run, recorder, _heard in watched))
    prompt["messages"].append({"role": "assistant", "content": "later"})  # after recording
    for run, recorder, heard in watched:
        frames = [await heard() for _ in range(20)]
        # Each step, then its token, in the order recorded, each persisted before announced.
        assert [(f["type"], f["seq"]) for f in frames] == [
            (kind, seq) for seq in range(1, 11) for kind in ("run.step", "run.token")]
        assert all(f["sent_at"] >= f["recorded_at"] for f in frames if f["type"] == "run.step")
        await recorder.status("succeeded", {"answer": "4"})
        assert (await heard())["type"] == "run.status"
        rows = [r async for r in Step.objects.filter(run=run).order_by("seq")]
        assert [r.seq for r in rows] == list(range(1, 11))
        assert rows[0].input == {"messages": [{"role": "user", "content": "What is 2+2?"}]}
        await run.arefresh_from_db()
        assert (run.step_count, run.status, run.final_answer) == (10, "succeeded", "4")


@pytest.mark.django_db(transaction=True)
async def test_a_step_that_cannot_be_written_fails_the_run_and_is_not_announced(user):
    run, recorder, heard = await watched_run(user)
    other, other_recorder, other_heard = await watched_run(user)
    await recorder.step(StepRecord(seq=1, kind="tool", name="calculator", status="ok"))
    assert (await heard())["seq"] == 1
    await run.adelete()  # its steps can no longer be written (their run is gone)

    # Another run's step handed over at the same moment (often the same batch) still lands.
    failing = recorder.step(StepRecord(seq=2, kind="tool", name="calculator", status="ok"))
    fine = other_recorder.step(StepRecord(seq=1, kind="tool", name="calculator", status="ok"))
    outcomes = await asyncio.gather(failing, fine, return_exceptions=True)
    assert isinstance(outcomes[0], IntegrityError) and outcomes[1] is None
    with pytest.raises(asyncio.TimeoutError):  # never announced: it is not in the trace
        await heard(0.3)
    assert (await other_heard())["seq"] == 1
    assert await Step.objects.filter(run=other).acount() == 1
    await recorder.status("failed", {"error": "x"})  # a status is still written (a no-op here)


@pytest.mark.django_db(transaction=True)
async def test_status_updates_carry_answer_error_and_totals(user):
    run = await sync_to_async(new_run)(user)
    recorder = Recorder(run.pk, publish=False)
    await recorder.status("running", {})
    await run.arefresh_from_db()
    assert run.status == "running" and run.started_at and run.worker == process_id()
    assert parse_process_id(run.worker).pid == os.getpid()
    totals = {"llm_calls": 3, "tool_calls": 2, "tokens_in": 100, "tokens_out": 20,
              "cost_usd": 0.5, "wall_ms": 1234.0, "format_errors": 1, "reflections": 0}
    await recorder.status("succeeded", {"answer": "4", "error": None, "totals": totals})
    await run.arefresh_from_db()
    assert (run.status, run.final_answer, run.error) == ("succeeded", "4", "")
    assert {key: getattr(run, key) for key in totals} == totals  # every total, as handed over
    assert run.finished_at is not None
    await recorder.status("failed", {"error": "it broke", "totals": {**totals, "reflections": 2}})
    await run.arefresh_from_db()
    assert (run.status, run.error, run.reflections, run.final_answer) == (
        "failed", "it broke", 2, "4")  # what the detail does not name stays as it was


@pytest.mark.django_db
def test_runs_left_running_by_a_dead_process_become_interrupted(user):
    dead = subprocess.Popen(["true"])
    dead.wait()
    import socket

    host = socket.gethostname()
    orphan = new_run(user, status="running", worker=f"{host}:{dead.pid}")
    alive = new_run(user, status="running", worker=f"{host}:1")  # pid 1 is alive
    finished = new_run(user, status="succeeded", worker=f"{host}:{dead.pid}")
    assert mark_interrupted() == 1
    orphan.refresh_from_db()
    alive.refresh_from_db()
    finished.refresh_from_db()
    assert orphan.status == "interrupted" and "resume" in orphan.error
    assert alive.status == "running" and finished.status == "succeeded"


@pytest.mark.django_db
def test_a_user_sees_only_their_own_runs_and_staff_see_all(client, user, other_user, staff):
    mine = new_run(user)
    theirs = new_run(other_user)
    client.force_login(user)
    assert client.get(f"/runs/{mine.pk}/").status_code == 200
    assert client.get(f"/runs/{theirs.pk}/").status_code == 404
    listing = client.get("/runs/").content.decode()
    assert f"/runs/{mine.pk}/" in listing and f"/runs/{theirs.pk}/" not in listing
    client.force_login(staff)
    assert client.get(f"/runs/{theirs.pk}/").status_code == 200


@pytest.mark.django_db(transaction=True)
async def test_a_version_superseded_in_its_batch_is_written_once_and_not_shown(user):
    """The writer's batches (agentlab/runs/writer.py): a step's "running" version, which its run
    does not wait for, and its end handed over before the writer took either are one row, and
    a watcher is shown only the end; what the writer is asked to do after them sees the row."""
    from agentlab.runs.writer import WRITER

    run, recorder, _heard = await watched_run(user)
    seen: list[dict] = []
    fanout.subscribe(run.pk, seen.append)
    gate, waiting = threading.Event(), threading.Event()

    def hold() -> None:  # the writer thread is busy until the gate opens
        waiting.set()
        gate.wait(30)
    held = WRITER.call(hold)
    try:  # the two versions and the call wait for it; its next batch takes them together
        await await_until(waiting.is_set, message="the writer held")
        await recorder.step(StepRecord(seq=1, kind="tool", name="calculator", status="running",
                                       input={"expression": "2+2"}))
        done = asyncio.create_task(recorder.step(StepRecord(
            seq=1, kind="tool", name="calculator", status="ok", input={"expression": "2+2"},
            text="4")))
        await turns()
        after = WRITER.call(lambda: list(Step.objects.filter(run_id=run.pk).values_list(
            "status", flat=True)))
    finally:
        gate.set()
    await held
    await asyncio.wait_for(done, 10)
    assert await asyncio.wait_for(after, 10) == ["ok"]  # the call came after the steps
    await recorder.flush()
    rows = [r async for r in Step.objects.filter(run=run)]
    assert [(r.seq, r.status, r.text) for r in rows] == [(1, "ok", "4")]
    steps = [m for m in seen if m["type"] == "run.step"]
    assert [(m["seq"], m["version"], m["step"]["status"]) for m in steps] == [(1, 2, "ok")]
    await run.arefresh_from_db()
    assert run.step_count == 1


@pytest.mark.django_db(transaction=True)
async def test_a_row_reads_back_as_the_step_that_was_recorded(user):
    """Rows are written by one hand-built upsert (traces/upsert.py): JSON, text, times and
    figures must come back as the ORM would have stored them, and a rewrite replaces them."""
    run = await sync_to_async(new_run)(user)
    recorder = Recorder(run.pk, publish=False)
    first = StepRecord(seq=1, kind="llm", role="planner", name="m", status="running",
                       parent=None, input={"messages": [{"role": "user", "content": "2+2 é ✓"}],
                                           "tools": None}, started_at=1_700_000_000.25)
    await recorder.step(first)
    await recorder.flush()
    final = StepRecord(seq=1, kind="llm", role="planner", name="m", status="ok", parent=None,
                       input=first.input, output={"text": "4", "tool_calls": []}, text="4",
                       started_at=first.started_at, duration_ms=12.5, tokens_in=7,
                       tokens_out=1, cost_usd=0.0001, meta={"attempts": 1, "ttft_ms": None})
    await recorder.step(final)
    row = await Step.objects.aget(run=run, seq=1)
    assert row.to_record() == final
    await run.arefresh_from_db()
    assert run.step_count == 1


def test_one_failing_watcher_does_not_keep_the_others_from_a_step(caplog):
    from agentlab.runs.registry import REGISTRY

    heard = []

    def broken(message):
        raise RuntimeError("this socket is gone")

    fanout.subscribe(991, broken)
    fanout.subscribe(991, heard.append)
    try:
        fanout.publish(991, {"type": "run.step", "seq": 1})
        assert heard == [{"type": "run.step", "seq": 1}] and fanout.watchers(991) == 2
    finally:
        fanout.unsubscribe(991, broken)
        fanout.unsubscribe(991, heard.append)
    assert fanout.watchers(991) == 0
    assert 991 not in REGISTRY  # nothing of the run is kept once its last watcher left
    fanout.unsubscribe(991, heard.append)  # again: nothing to do
    # The operator's log says which run and which event, with the watcher's error.
    (record,) = [r for r in caplog.records if r.name == "agentlab.runs.fanout"]
    assert record.getMessage() == "a watcher of run 991 failed on run.step"
    assert record.exc_info[1].args == ("this socket is gone",)


async def test_a_layer_that_cannot_take_an_event_is_logged_and_the_run_goes_on(
        settings, caplog):
    """An absent Redis (here: a real channels-redis layer pointed at a port nobody listens
    on) must never fail the run: this process's watchers still get the event, and the log
    says which could not go out."""
    from agentlab.bench.servers import free_port
    from agentlab.settings import redis_channel_layer

    settings.CHANNEL_LAYERS = {"default": redis_channel_layer(
        f"redis://127.0.0.1:{free_port()}")}
    layer = fanout.remote_layer()
    assert layer is not None
    seen: list[dict] = []
    fanout.subscribe(992, seen.append)
    try:
        fanout.publish(992, {"type": "run.step", "seq": 3})  # returns: the run goes on
        assert seen == [{"type": "run.step", "seq": 3}]

        def logged():
            return [r for r in caplog.records if r.name == "agentlab.runs.fanout"]
        (record,) = await await_until(logged, message="the failed send logged")
        assert record.getMessage() == "could not publish run.step for run 992"
        assert record.exc_info is not None
    finally:
        fanout.unsubscribe(992, seen.append)
        await layer.flush()


@pytest.mark.django_db(transaction=True)
async def test_a_run_that_goes_on_before_its_row_is_written_hears_of_a_failure_by_durable(user):
    """With `ahead` (the runner's: no other run waits for the CPU), a finished step's row is not
    waited for at once; `durable()` waits for it, and raises what waiting would have."""
    run = await sync_to_async(new_run)(user)
    recorder = Recorder(run.pk, ahead=lambda: True)
    await recorder.step(StepRecord(seq=1, kind="tool", name="calculator", status="ok"))
    await recorder.durable()
    assert await Step.objects.filter(run=run, seq=1).aexists()

    await run.adelete()  # the next row cannot be written
    await recorder.step(StepRecord(seq=2, kind="tool", name="calculator", status="ok"))
    with pytest.raises(IntegrityError):
        await recorder.durable()
    await recorder.durable()  # told once


@pytest.mark.django_db(transaction=True)
async def test_a_run_going_on_ahead_of_its_rows_waits_once_max_ahead_are_unwritten(user):
    """With `ahead`, a run may hand over seven finished rows without waiting; the eighth
    waits until they are written, so a crash loses at most eight (ARCHITECTURE.md)."""
    from agentlab.runs.writer import WRITER

    MAX_AHEAD = 8  # noqa: N806 (the documented figure, not the module's constant)

    run = await sync_to_async(new_run)(user)
    recorder = Recorder(run.pk, ahead=lambda: True)
    gate = threading.Event()
    held = WRITER.call(gate.wait, 30)  # the writer thread is busy until the gate opens
    try:
        for seq in range(1, MAX_AHEAD):  # each returns although its row cannot be written yet
            await asyncio.wait_for(recorder.step(StepRecord(seq=seq, kind="tool",
                                                            name="calculator", status="ok")), 5)
        last = asyncio.create_task(recorder.step(StepRecord(seq=MAX_AHEAD, kind="tool",
                                                            name="calculator", status="ok")))
        await turns()  # nothing it waits for can happen meanwhile: the writer is held
        assert not last.done(), f"step {MAX_AHEAD} went on with {MAX_AHEAD} rows unwritten"
        assert await Step.objects.filter(run=run).acount() == 0
    finally:
        gate.set()
    await asyncio.wait_for(last, 10)
    await held
    # Once it has waited, every row it handed over is in the database.
    assert await Step.objects.filter(run=run).acount() == MAX_AHEAD


@pytest.mark.django_db
def test_queued_runs_nobody_picked_up_become_interrupted_after_the_grace(user):
    from traces.startup import QUEUED_GRACE_S

    def queued(age_s: float, **fields) -> Run:
        run = new_run(user, status="queued", **fields)
        Run.objects.filter(pk=run.pk).update(created=timezone.now() - timedelta(seconds=age_s))
        return run

    forgotten = queued(QUEUED_GRACE_S + 60)
    recent = queued(QUEUED_GRACE_S - 60)  # its page may still open and start it
    claimed = queued(QUEUED_GRACE_S + 60, worker=process_id())  # this live process holds it
    assert mark_interrupted() == 1
    for run in (forgotten, recent, claimed):
        run.refresh_from_db()
    assert (forgotten.status, recent.status, claimed.status) == (
        "interrupted", "queued", "queued")
    assert "resume" in forgotten.error and forgotten.finished_at is not None


@pytest.mark.django_db
def test_the_status_row_and_the_last_resort_called_directly(user):
    """What the writer thread runs for a status, and what marks a run failed when its end
    cannot be written, called in the test's own thread (mutmut traces only this thread)."""
    from agentlab.runs.recorder import mark_failed, save_status

    run = new_run(user)
    save_status(run.pk, "running", {})
    save_status(run.pk, "running", {})  # a second "running" (a resume) keeps the first start
    run.refresh_from_db()
    started = run.started_at
    assert run.status == "running" and started and run.worker == process_id()
    assert run.finished_at is None
    save_status(run.pk, "paused", {"answer": None, "error": None})
    run.refresh_from_db()
    assert (run.status, run.final_answer, run.error, run.started_at) == ("paused", "", "",
                                                                        started)
    assert mark_failed(run.pk, "succeeded", "disk full") == 1
    run.refresh_from_db()
    assert run.status == "failed" and run.finished_at is not None
    assert run.error == ("Its end (succeeded) could not be recorded, so its answer and totals "
                         "are not stored: disk full")
    assert mark_failed(run.pk, "succeeded", "again") == 0  # only a run still active


@pytest.mark.django_db(transaction=True)
async def test_flush_waits_until_every_step_handed_over_is_published(user):
    """What a run's status waits for (so a final status never overtakes a step): `flush()`
    returns only once each step handed over before it has been written and published."""
    from agentlab.runs.writer import WRITER

    run, recorder, _heard = await watched_run(user)
    seen: list[dict] = []
    fanout.subscribe(run.pk, seen.append)
    gate = threading.Event()
    held = WRITER.call(gate.wait, 30)  # the writer thread is busy until the gate opens
    try:
        steps = [asyncio.create_task(recorder.step(StepRecord(
            seq=seq, kind="tool", name="calculator", status="ok"))) for seq in (1, 2)]
        flushed = asyncio.create_task(recorder.flush())
        await turns()  # nothing it waits for can happen meanwhile: the writer is held
        assert not flushed.done() and not any(s.done() for s in steps)
        second = asyncio.create_task(recorder.flush())  # two waiters share one drain
        await turns()
        assert not second.done()
    finally:
        gate.set()
    await asyncio.wait_for(flushed, 10)
    assert [m["seq"] for m in seen] == [1, 2]  # published by the time flush returned
    await asyncio.wait_for(asyncio.gather(second, *steps), 10)
    await held
    await asyncio.wait_for(recorder.flush(), 1)  # nothing waits: at once
