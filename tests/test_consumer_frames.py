"""What the run socket tells the page, frame by frame: the final frame (live and on reconnect)
with the error and the totals the page shows, the clocks a step frame carries, the sync's
defaults and refusals, and the limit on events waiting for a socket at its exact edge.

Written from the mutants of agentlab/live/consumers.py that the broader tests let through
(docs/TESTING.md, "Mutation testing"). Runs are recorded by the real recorder and writer; the
socket is the real ASGI application.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from agentlab.live import consumers
from agentlab.runs.recorder import Recorder
from tests.sockets import connect, frames_until, is_type, synced
from traces.models import Run
from traces.schema import Step as StepRecord

pytestmark = pytest.mark.django_db(transaction=True)

TOTALS = {"llm_calls": 2, "tool_calls": 1, "tokens_in": 120, "tokens_out": 30,
          "cost_usd": 0.25, "wall_ms": 1500.0, "format_errors": 1, "reflections": 1}


async def running_run(user) -> Run:
    return await Run.objects.acreate(user=user, input="q", agent_name="t", paradigm="react",
                                     status="running")


async def test_the_final_frame_carries_the_error_and_the_totals_live_and_on_reconnect(user):
    run = await running_run(user)
    comm = await connect(run.pk, user)
    await synced(comm)
    await Recorder(run.pk).status("failed", {"error": "the model is down", "totals": TOTALS})
    frames = await frames_until(comm, is_type("final"))
    assert frames[-2:] == [
        {"type": "status", "status": "failed",
         "detail": {"error": "the model is down", "totals": TOTALS}},
        {"type": "final", "status": "failed", "answer": None, "error": "the model is down",
         "totals": TOTALS}]
    await comm.disconnect()

    later = await connect(run.pk, user)  # a page opened after the end reads the same
    frames = await synced(later)
    assert frames[-2] == {"type": "final", "status": "failed", "answer": "",
                          "error": "the model is down", "totals": TOTALS}
    await later.disconnect()


async def test_a_final_status_without_totals_still_gives_the_page_a_totals_object(user):
    run = await running_run(user)
    comm = await connect(run.pk, user)
    await synced(comm)
    await Recorder(run.pk).status("cancelled", {})
    final = (await frames_until(comm, is_type("final")))[-1]
    assert final == {"type": "final", "status": "cancelled", "answer": None, "error": None,
                     "totals": {}}
    await comm.disconnect()


async def test_a_live_step_frame_carries_the_recorder_s_clocks(user):
    run = await running_run(user)
    comm = await connect(run.pk, user)
    await synced(comm)
    await Recorder(run.pk).step(StepRecord(seq=1, kind="tool", name="calculator", text="42"))
    frame = (await frames_until(comm, is_type("step")))[-1]
    assert isinstance(frame["recorded_at"], float) and isinstance(frame["sent_at"], float)
    assert frame["sent_at"] >= frame["recorded_at"]  # handed over, then written
    await comm.disconnect()


async def test_a_sync_without_last_seq_sends_every_step_and_a_negative_one_is_refused(user):
    run = await running_run(user)
    recorder = Recorder(run.pk)
    for seq in (1, 2):
        await recorder.step(StepRecord(seq=seq, kind="thought", text=f"thought {seq}"))
    comm = await connect(run.pk, user)
    await comm.send_json_to({"action": "sync", "last_seq": -1})
    assert (await comm.receive_json_from())["error"] == '"last_seq" must be a whole number ≥ 0'
    await comm.send_json_to({"action": "sync"})
    frames = await frames_until(comm, is_type("synced"))
    assert [f["seq"] for f in frames if f["type"] == "step"] == [1, 2]
    assert frames[-1] == {"type": "synced", "last_seq": 2}
    await comm.disconnect()


async def test_as_many_events_as_the_outbox_holds_wait_out_a_sync(user, settings, monkeypatch):
    """AGENTLAB_SOCKET_OUTBOX events may wait for a socket; only one more closes it."""
    settings.AGENTLAB_SOCKET_OUTBOX = 2
    run = await running_run(user)
    recorder = Recorder(run.pk)
    read = consumers.steps_after

    async def two_events_while_it_reads(run_id: int, after: int, limit: int):
        rows = await read(run_id, after, limit)
        if after == 0:
            await recorder.token(1, "a")
            await recorder.token(1, "b")
        return rows

    monkeypatch.setattr(consumers, "steps_after", two_events_while_it_reads)
    comm = await connect(run.pk, user)
    await synced(comm)
    tokens = await frames_until(comm, lambda f: f.get("delta") == "b")
    assert [f["delta"] for f in tokens] == ["a", "b"]
    await comm.disconnect()


async def test_a_socket_whose_outbox_holds_one_event_still_gets_every_step(user, settings):
    settings.AGENTLAB_SOCKET_OUTBOX = 1
    run = await running_run(user)
    comm = await connect(run.pk, user)
    await synced(comm)
    recorder = Recorder(run.pk)
    for seq in (1, 2, 3):
        await recorder.step(StepRecord(seq=seq, kind="thought", text=f"thought {seq}"))
    frames = await frames_until(comm, is_type("step", seq=3))
    assert [f["seq"] for f in frames if f["type"] == "step"] == [1, 2, 3]
    await comm.disconnect()


@pytest.mark.usefixtures("stop_runs")
async def test_a_page_opened_on_a_running_run_gets_its_debug_settings_and_no_pause_detail(
        calc_agent, user, fake_llm):
    from agentlab.runs.snapshot import create_run
    from tests.fake_openai import Reply
    from tests.sockets import ANSWER

    run = await sync_to_async(create_run)(calc_agent, user, "What is 6*7?")
    fake_llm.script(Reply(tool_calls=[("calculator", '{"expression": "6*7"}')],
                          chunk_delay_s=0.2), ANSWER)
    first = await connect(run.pk, user)
    await synced(first)
    await first.send_json_to({"action": "debug", "step_mode": False,
                              "break_tools": ["calculator"]})
    await first.send_json_to({"action": "start"})
    await frames_until(first, is_type("step", seq=1))  # its first model call is under way
    second = await connect(run.pk, user)
    state = next(f for f in await synced(second) if f["type"] == "status")
    assert state["status"] == "running" and state["detail"] == {}
    assert state["debug"]["step_mode"] is False
    assert state["debug"]["break_tools"] == ["calculator"]
    await first.disconnect()
    await second.disconnect()


async def test_debug_settings_for_a_run_that_has_ended_are_refused(user):
    run = await Run.objects.acreate(user=user, input="q", agent_name="t", paradigm="react",
                                    status="succeeded")
    comm = await connect(run.pk, user)
    await comm.send_json_to({"action": "debug", "step_mode": True})
    assert (await comm.receive_json_from())["error"] == "the run is not active"
    await comm.disconnect()


async def test_a_step_published_before_the_page_asks_to_sync_reaches_it_once_from_the_sync(
        user):
    """Between a socket's admission and its sync, the run's live events are not sent: the sync
    reads them from the database (persist, then publish), so the page gets each step once."""
    run = await running_run(user)
    early = await connect(run.pk, user)  # admitted and listening; it has not asked to sync
    watcher = await connect(run.pk, user)
    await synced(watcher)
    await Recorder(run.pk).step(StepRecord(seq=1, kind="tool", name="calculator", text="42"))
    await frames_until(watcher, is_type("step"))  # published: every listener has heard it
    frames = await synced(early)
    assert [f["seq"] for f in frames if f["type"] == "step"] == [1]
    await early.disconnect()
    await watcher.disconnect()
