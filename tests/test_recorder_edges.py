"""The recorder at its edges: what it publishes (each version of a step, the status), which
steps count as closing a run, what a lost row does to the run's end, and what it leaves behind.

Written from the mutants of agentlab/runs/recorder.py that the broader tests let through
(docs/TESTING.md, "Mutation testing"): each test pins one thing a user or an operator relies on.
Rows are written by the real writer thread to the test database; a row is made to fail where the
writer writes it (agentlab.runs.writer.upsert_steps), as a full disk would.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading

import pytest
from asgiref.sync import sync_to_async
from django.db import OperationalError

from agentlab.runs import fanout, recorder, writer
from agentlab.runs.recorder import Recorder, mark_failed, save_status
from agentlab.runs.registry import REGISTRY
from tests.factories import new_run
from tests.failing_writes import failing_rows
from tests.waiting import await_until, turns
from traces.models import Step
from traces.schema import Step as StepRecord


def heard_by_a_watcher(run_id: int) -> list[dict]:
    """What a socket of this process watching the run is handed, in order."""
    seen: list[dict] = []
    fanout.subscribe(run_id, seen.append)
    return seen


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("kind", "meta", "closing"), [
    ("final", {}, True),  # the answer
    ("tool", {"unfinished": "cancelled"}, True),  # closed by RunContext.close_open_steps
    ("error", {"status": "failed"}, True),  # the error the run ends with
    ("error", {}, False),  # an error the run goes on after (a bad tool call)
    ("tool", {"status": "failed"}, False),
    ("llm", {}, False),
])
async def test_the_steps_that_close_a_run(user, monkeypatch, quick_retries, caplog, kind, meta,
                                          closing):
    """A step written while the run ends whose row is lost is logged, and the run goes on to
    its status; any other step whose row is lost fails where the run handed it over."""
    monkeypatch.setattr(writer, "upsert_steps", failing_rows(kind, times=None))
    for seq, step_meta in enumerate([meta, None] if not meta else [meta], start=1):
        run = await sync_to_async(new_run)(user)  # (None: an imported row's null)
        step = StepRecord(seq=seq, kind=kind, name="x", meta=step_meta)
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger="agentlab.runs.recorder"):
            if closing:
                await Recorder(run.pk).step(step)
            else:
                with pytest.raises(OperationalError):
                    await Recorder(run.pk).step(step)
        assert [r.getMessage() for r in caplog.records] == ([
            f"run {run.pk}: the row of its {kind} step {seq} could not be written: disk I/O "
            "error"] if closing else [])


@pytest.mark.django_db(transaction=True)
async def test_a_failed_row_written_ahead_is_named_though_later_rows_were_written(user,
                                                                                 monkeypatch):
    """Rows a run went on ahead of: the written ones are let go, a failed one is kept until
    the run waits for its rows, which then fails as waiting for it at once would have."""
    run = await sync_to_async(new_run)(user)
    upsert = failing_rows("tool", times=1)
    monkeypatch.setattr(writer, "upsert_steps", upsert)
    rec = Recorder(run.pk, ahead=lambda: True)
    await rec.step(StepRecord(seq=1, kind="tool", name="calculator"))  # not waited for
    await rec.flush()  # its row's outcome (failed) has reached the run
    assert upsert.failures == 1
    for seq in (2, 3):  # each letting go of the rows known to be written before it
        await rec.step(StepRecord(seq=seq, kind="thought", text="on"))
    with pytest.raises(OperationalError, match="disk I/O error"):
        await rec.durable()
    await rec.flush()
    assert await Step.objects.filter(run=run).acount() == 2  # the later rows were written


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("status", ["running", "ok"])
async def test_a_lost_row_nobody_waited_for_is_not_reported_by_asyncio(user, monkeypatch,
                                                                      caplog, status):
    """A "running" version's row, or one the run went on ahead of, that fails: the run hears
    of it where it matters (its next version, `durable()`), never as an exception asyncio
    logs for a future whose failure nobody retrieved."""
    run = await sync_to_async(new_run)(user)
    upsert = failing_rows("llm", times=None)
    monkeypatch.setattr(writer, "upsert_steps", upsert)
    rec = Recorder(run.pk, publish=False, ahead=lambda: True)
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        await rec.step(StepRecord(seq=1, kind="llm", name="m", status=status))
        await await_until(lambda: upsert.failures == 1, message="the row failed")
        await turns()
        del rec  # with it, what it kept of the row ("ok": to name it at `durable()`)
        await writer.WRITER.call(lambda: None)  # the writer thread lets go of its last batch
        gc.collect()
        await turns()
    assert not [r for r in caplog.records if r.name == "asyncio"], caplog.text


@pytest.mark.django_db(transaction=True)
async def test_a_run_cancelled_while_it_waits_for_its_rows_logs_nothing(user, caplog):
    """A run cancelled while it waits for the rows it went on ahead of: its rows are still
    written, and nothing is logged for the wait it gave up."""
    run = await sync_to_async(new_run)(user)
    rec = Recorder(run.pk, publish=False, ahead=lambda: True)
    gate, waiting = threading.Event(), threading.Event()

    def hold() -> None:  # the writer thread is busy until the gate opens
        waiting.set()
        gate.wait(30)
    held = writer.WRITER.call(hold)
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        try:
            await await_until(waiting.is_set, message="the writer held")
            await rec.step(StepRecord(seq=1, kind="tool", name="calculator"))  # not waited for
            waits = asyncio.create_task(rec.durable())
            await turns()
            waits.cancel()
            await turns()
        finally:
            gate.set()
        await held
        await writer.WRITER.call(lambda: None)
        await turns()
    assert waits.cancelled()
    assert await Step.objects.filter(run=run).acount() == 1
    assert not [r for r in caplog.records if r.name == "asyncio"], caplog.text


@pytest.mark.django_db
def test_a_status_touches_its_own_run_only(user):
    run, queued, active = new_run(user), new_run(user), new_run(user, status="running")
    save_status(run.pk, "running", {})
    run.refresh_from_db()
    first_start = run.started_at
    save_status(run.pk, "running", {})  # a resume keeps the first start
    run.refresh_from_db()
    queued.refresh_from_db()
    assert run.started_at == first_start and queued.started_at is None
    assert mark_failed(run.pk, "succeeded", "disk full") == 1
    active.refresh_from_db()
    assert active.status == "running" and active.error == ""  # another run going on is not it


@pytest.mark.django_db(transaction=True)
async def test_each_version_of_a_step_is_published_with_its_number_and_content(user):
    run = await sync_to_async(new_run)(user)
    seen = heard_by_a_watcher(run.pk)
    rec = Recorder(run.pk)
    await rec.step(StepRecord(seq=1, kind="llm", name="m", status="running"))
    # (not handed over before the first is published: a version superseded in its batch is
    # never shown, test_recorder.py)
    await await_until(lambda: seen, message="the running version published")
    await rec.step(StepRecord(seq=1, kind="llm", name="m", status="ok", text="4"))
    await rec.step(StepRecord(seq=2, kind="final", text="4"))
    await rec.status("succeeded", {"answer": "4"})
    await rec.flush()
    steps = [m for m in seen if m["type"] == "run.step"]
    assert [(m["seq"], m["version"]) for m in steps] == [(1, 1), (1, 2), (2, 1)]
    assert [(m["step"]["kind"], m["step"]["status"], m["step"]["text"]) for m in steps] == [
        ("llm", "running", ""), ("llm", "ok", "4"), ("final", "ok", "4")]
    assert seen[-1] == {"type": "run.status", "status": "succeeded", "detail": {"answer": "4"}}


@pytest.mark.django_db(transaction=True)
async def test_a_published_run_leaves_nothing_behind_in_the_registry(user):
    run = await sync_to_async(new_run)(user)
    rec = Recorder(run.pk)
    await rec.step(StepRecord(seq=1, kind="tool", name="calculator"))
    await rec.status("succeeded", {"answer": "4"})
    await rec.flush()
    assert REGISTRY.entry(run.pk) is None  # a long-lived worker keeps no entry per run


@pytest.mark.django_db(transaction=True)
async def test_another_loops_recorder_finishing_does_not_cut_this_ones_wait_short(user):
    """Two recorders of one run on two event loops (a run resumed by another thread): when
    the other loop's step is published, this loop's `flush()` — what a status waits for, so
    that it never overtakes a step — still waits for this loop's own step."""
    run = await sync_to_async(new_run)(user)
    seen: list[dict] = []
    fanout.subscribe(run.pk, seen.append)
    gate, waiting = threading.Event(), threading.Event()

    def hold() -> None:  # the writer thread is busy until the gate opens
        waiting.set()
        gate.wait(30)
    held = writer.WRITER.call(hold)
    await await_until(waiting.is_set, message="the writer held")
    other = threading.Thread(target=lambda: asyncio.run(Recorder(run.pk).step(
        StepRecord(seq=1, kind="thought", text="from the other loop"))))
    try:
        other.start()
        await await_until(lambda: REGISTRY.entry(run.pk).lane is not None,
                          message="the other loop's step handed over")
        mine = Recorder(run.pk)
        await mine.step(StepRecord(seq=2, kind="llm", name="m", status="running"))
    finally:
        gate.set()
    other.join(10)  # its step is written and published; this loop has not turned since
    assert [m["seq"] for m in seen] == [1]
    await asyncio.wait_for(mine.flush(), 10)
    assert [m["seq"] for m in seen] == [1, 2]  # published by the time flush returned
    await held
    fanout.unsubscribe(run.pk, seen.append)


@pytest.mark.django_db(transaction=True)
async def test_a_running_step_does_not_wait_for_its_row(user, caplog):
    """A `running` version is followed by its end, which the run waits for: handing it over
    returns at once, and nothing is logged for it."""
    run = await sync_to_async(new_run)(user)
    rec = Recorder(run.pk)
    gate = threading.Event()
    held = writer.WRITER.call(gate.wait, 30)  # the writer thread is busy until the gate opens
    try:
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            running = asyncio.create_task(rec.step(StepRecord(seq=1, kind="llm", name="m",
                                                              status="running")))
            await turns()
            assert running.done(), "a running step waited for its row"
    finally:
        gate.set()
    await held
    await rec.step(StepRecord(seq=1, kind="llm", name="m", status="ok"))
    ahead = Recorder(run.pk, ahead=lambda: True)  # a row not waited for: quiet too
    await ahead.step(StepRecord(seq=2, kind="tool", name="calculator"))
    await ahead.durable()
    await rec.flush()
    assert not [r for r in caplog.records if r.name == "asyncio"], caplog.text


@pytest.mark.django_db(transaction=True)
async def test_a_closing_step_written_at_once_logs_nothing(user, caplog):
    run = await sync_to_async(new_run)(user)
    with caplog.at_level(logging.WARNING, logger="agentlab.runs.recorder"):
        await Recorder(run.pk).step(StepRecord(seq=1, kind="final", text="4"))
    assert await Step.objects.filter(run=run, kind="final").aexists()
    assert not caplog.records, caplog.text


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("publish", [True, False])
async def test_a_closing_row_that_fails_once_is_written_again_and_published_once(
        user, monkeypatch, quick_retries, caplog, publish):
    run = await sync_to_async(new_run)(user)
    seen = heard_by_a_watcher(run.pk)
    upsert = failing_rows("final", times=1)
    monkeypatch.setattr(writer, "upsert_steps", upsert)
    rec = Recorder(run.pk, publish=publish)
    with caplog.at_level(logging.WARNING, logger="agentlab.runs.recorder"):
        await rec.step(StepRecord(seq=2, kind="final", text="4"))
        await rec.flush()
    assert upsert.failures == 1
    assert await Step.objects.filter(run=run, kind="final").acount() == 1
    assert [r.getMessage() for r in caplog.records] == [
        f"run {run.pk}: the row of its final step 2 failed (disk I/O error); retrying in "
        "0.01 s"]
    published = [(m["seq"], m["step"]["kind"]) for m in seen if m["type"] == "run.step"]
    assert published == ([(2, "final")] if publish else [])


@pytest.mark.django_db(transaction=True)
async def test_a_closing_row_that_never_lands_is_logged_with_the_run_and_the_step(
        user, monkeypatch, quick_retries, caplog):
    run = await sync_to_async(new_run)(user)
    monkeypatch.setattr(writer, "upsert_steps", failing_rows("error", times=None))
    rec = Recorder(run.pk)
    with caplog.at_level(logging.ERROR, logger="agentlab.runs.recorder"):
        await rec.step(StepRecord(seq=3, kind="error", status="error", text="boom",
                                  meta={"status": "failed"}))
    assert [r.getMessage() for r in caplog.records] == [
        f"run {run.pk}: the row of its error step 3 could not be written: disk I/O error"]
    await rec.status("cancelled", {})  # an ending other than success keeps its name
    await run.arefresh_from_db()
    assert run.status == "cancelled"
    assert run.error == ("1 row(s) of this run could not be recorded, so its trace is "
                         "incomplete; the first: step 3 (error): disk I/O error")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("ending", "error", "status", "says"), [
    ("succeeded", None, "failed", "{note}"),
    ("failed", "the model is down", "failed", "the model is down ({note})"),
])
async def test_a_lost_row_is_named_in_the_run_s_error(user, monkeypatch, ending, error, status,
                                                      says):
    run = await sync_to_async(new_run)(user)
    monkeypatch.setattr(writer, "upsert_steps", failing_rows("tool", times=None))
    rec = Recorder(run.pk)
    with pytest.raises(OperationalError):
        await rec.step(StepRecord(seq=2, kind="tool", name="calculator"))
    await rec.status(ending, {"error": error})
    await run.arefresh_from_db()
    note = ("1 row(s) of this run could not be recorded, so its trace is incomplete; the "
            "first: step 2 (tool): disk I/O error")
    assert (run.status, run.error) == (status, says.format(note=note))


@pytest.mark.django_db(transaction=True)
async def test_a_row_written_ahead_that_failed_is_named_at_the_end(user, monkeypatch, caplog):
    run = await sync_to_async(new_run)(user)
    monkeypatch.setattr(writer, "upsert_steps", failing_rows("tool", times=None))
    rec = Recorder(run.pk, ahead=lambda: True)
    await rec.step(StepRecord(seq=2, kind="tool", name="calculator"))  # not waited for
    with caplog.at_level(logging.ERROR, logger="agentlab.runs.recorder"):
        await rec.status("succeeded", {"answer": "4"})
    assert [r.getMessage() for r in caplog.records] == [
        f"run {run.pk}: a step's row could not be written"]
    await run.arefresh_from_db()
    assert run.status == "failed" and run.final_answer == "4"
    assert run.error.endswith("the first: a step written ahead: disk I/O error")


@pytest.mark.django_db(transaction=True)
async def test_a_status_written_at_once_does_not_wait_first(user, monkeypatch):
    waits: list[float] = []

    class NotedSleeps:  # the recorder's asyncio, with the waits it asks for noted
        def __getattr__(self, name: str):
            return getattr(asyncio, name)

        async def sleep(self, delay: float) -> None:
            waits.append(delay)

    monkeypatch.setattr(recorder, "asyncio", NotedSleeps())
    run = await sync_to_async(new_run)(user)
    await Recorder(run.pk).status("succeeded", {"answer": "4"})
    await run.arefresh_from_db()
    assert run.status == "succeeded" and waits == []  # retries wait; a first try does not
