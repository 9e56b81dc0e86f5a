"""The live-run socket /ws/runs/<id>/ end to end: the real ASGI application (origin check,
session auth), real runs started over the socket, the scripted OpenAI-compatible HTTP server
(tests/fake_openai.py) as the model, the database as the record."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from agentlab.asgi import application
from agentlab.models import Tool
from agentlab.runs import control as run_control
from agentlab.runs import fanout
from agentlab.runs.snapshot import create_run
from tests.fake_openai import Reply
from tests.sockets import ANSWER, CALL, connect, frames_until, is_type, new_seqs, paused, synced
from tests.waiting import await_until
from traces.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def queued(agent, user):
    return create_run(agent, user, "What is 6*7?")


async def test_anonymous_and_another_users_run_are_refused_alike(queued, other_user, staff):
    for who in (None, other_user):
        comm = await connect(queued.pk, who)
        assert (await comm.receive_json_from())["type"] == "error"
        assert await comm.receive_output() == {"type": "websocket.close", "code": 4403}
    missing = await connect(queued.pk + 1000, other_user)
    await missing.receive_json_from()
    assert await missing.receive_output() == {"type": "websocket.close", "code": 4403}
    comm = await connect(queued.pk, staff)  # staff watch every run
    frames = await synced(comm)
    assert frames[0] == {"type": "status", "status": "queued", "detail": {}}
    await comm.disconnect()


async def test_a_foreign_origin_is_refused(queued, user):
    hdrs = [(b"origin", b"http://evil.example")]
    comm = WebsocketCommunicator(application, f"/ws/runs/{queued.pk}/", headers=hdrs)
    connected, _ = await comm.connect()
    assert not connected


async def test_a_run_started_over_the_socket_streams_steps_tokens_and_the_answer(
        queued, user, fake_llm, stop_runs):
    fake_llm.script(CALL, ANSWER)
    comm = await connect(queued.pk, user)
    await synced(comm)
    await comm.send_json_to({"action": "start"})
    frames = await frames_until(comm, is_type("final"))
    steps = [f for f in frames if f["type"] == "step"]
    assert new_seqs(frames) == [1, 2, 3, 4]
    assert [s["kind"] for s in steps if s["status"] != "running"] == ["llm", "tool", "llm", "final"]
    assert 'data-seq="2"' in steps[2]["html"] and "calculator" in steps[2]["html"]
    assert "".join(f["delta"] for f in frames if f["type"] == "token") == "6 times 7 is 42."
    assert frames[-1]["status"] == "succeeded" and frames[-1]["answer"] == "6 times 7 is 42."
    await comm.send_json_to({"action": "start"})
    assert (await comm.receive_json_from())["error"] == "the run has already started"
    await comm.disconnect()


async def test_reconnect_backfills_what_was_missed_with_no_gaps_or_duplicates(
        queued, user, fake_llm, stop_runs):
    fake_llm.script(CALL, ANSWER)
    first = await connect(queued.pk, user)
    await synced(first)
    await first.send_json_to({"action": "debug", "step_mode": True})
    await first.send_json_to({"action": "start"})
    got = await frames_until(first, paused)
    assert new_seqs(got) == [1]
    await first.disconnect()  # the watcher leaves; the run waits at its pause

    second = await connect(queued.pk, user)
    frames = await synced(second, last_seq=0)
    assert new_seqs(frames) == [1]
    state = next(f for f in frames if f["type"] == "status")
    assert state["status"] == "paused" and state["detail"]["pending"]["seq"] == 1
    await second.send_json_to({"action": "debug", "step_mode": False})
    await second.send_json_to({"action": "resume"})
    frames += await frames_until(second, is_type("final"))
    assert new_seqs(frames) == [1, 2, 3, 4]
    await second.disconnect()

    third = await connect(queued.pk, user)  # a page opened after the end, holding steps 1-2
    late = await synced(third, last_seq=2)
    assert [f["seq"] for f in late if f["type"] == "step"] == [3, 4]
    assert [f["type"] for f in late[2:]] == ["status", "final", "synced"]
    assert late[-1] == {"type": "synced", "last_seq": 4}
    await third.disconnect()


async def test_pause_step_and_cancel_a_live_run(queued, user, fake_llm, stop_runs):
    fake_llm.script(Reply(tool_calls=[("calculator", '{"expression": "6*7"}')],
                          chunk_delay_s=0.1), ANSWER)
    comm = await connect(queued.pk, user)
    await synced(comm)
    await comm.send_json_to({"action": "start"})
    await frames_until(comm, is_type("step", seq=1))  # the first LLM call is under way
    await comm.send_json_to({"action": "pause"})
    frames = await frames_until(comm, paused)
    pending = frames[-1]["detail"]["pending"]
    assert (pending["kind"], pending["name"]) == ("tool", "calculator")
    assert frames[-1]["detail"]["reason"] == "paused by the user"
    await comm.send_json_to({"action": "step"})
    frames = await frames_until(comm, paused)
    assert frames[-1]["detail"]["pending"]["kind"] == "llm"
    assert frames[-1]["detail"]["reason"].startswith("stepped")
    await comm.send_json_to({"action": "cancel"})
    frames = await frames_until(comm, is_type("final"))
    assert frames[-1]["status"] == "cancelled"
    run = await Run.objects.aget(pk=queued.pk)
    assert run.status == "cancelled"
    await comm.send_json_to({"action": "resume"})
    assert (await comm.receive_json_from())["error"] == "the run is not active"
    await comm.disconnect()


@pytest.mark.parametrize("decision", ["approve", "deny"])
async def test_approval_waits_for_whoever_opens_the_run_later(
        decision, agent, queued, user, fake_llm, stop_runs):
    await Tool.objects.filter(name="calculator").aupdate(needs_approval=True)
    run = await sync_to_async(create_run)(agent, user, "What is 6*7?")
    fake_llm.script(CALL, Reply(text="Done."))
    first = await connect(run.pk, user)
    await synced(first)
    await first.send_json_to({"action": "start"})
    frames = await frames_until(first, paused)
    assert frames[-1]["detail"]["waiting_for"] == "approval"
    assert any(f["type"] == "approval" and f["tool"] == "calculator" for f in frames)
    await first.disconnect()
    await await_until(lambda: fanout.watchers(run.pk) == 0, message="the socket left")
    assert (await Run.objects.aget(pk=run.pk)).status == "paused"  # nobody decided: it waits
    assert [s.name for s in run_control.get(run.pk).approvals()] == ["calculator"]

    later = await connect(run.pk, user)
    frames = await synced(later)
    approval = next(f for f in frames if f["type"] == "approval")
    assert approval["arguments"] == {"expression": "6*7"}
    if decision == "approve":
        await later.send_json_to({"action": "approve", "seq": approval["seq"],
                                  "arguments": {"expression": "6*8"}})
    else:
        await later.send_json_to({"action": "deny", "seq": approval["seq"], "reason": "no"})
    await frames_until(later, is_type("final"))
    tool = await (await Run.objects.aget(pk=run.pk)).steps.filter(kind="tool").aget()
    if decision == "approve":
        assert tool.input == {"expression": "6*8"} and "48" in tool.text
    else:
        assert tool.status == "error" and "denied this call: no" in tool.text
    await later.disconnect()


async def test_malformed_frames_get_an_error_and_the_socket_stays_open(queued, user):
    comm = await connect(queued.pk, user)
    for raw, message in [("not json", "not valid JSON"), ("[1, 2]", "must be a JSON object"),
                         ('{"action": "fly"}', "unknown action 'fly'"),
                         ('{"action": "sync", "last_seq": "x"}', '"last_seq" must be'),
                         ('{"action": "pause"}', "the run is not active"),
                         ('{"action": "debug", "step_mode": 1}', '"step_mode" must be')]:
        await comm.send_to(text_data=raw)
        frame = await comm.receive_json_from()
        assert frame["type"] == "error" and message in frame["error"], (raw, frame)
        assert frame["frame"].startswith(raw[:5])
    assert (await synced(comm))[-1]["type"] == "synced"
    await comm.disconnect()


async def test_events_published_while_a_sync_reads_come_right_after_it(user, monkeypatch):
    """A reconnecting page syncs from the database while the run goes on: what is recorded
    after its read (a step, a token) is held back and sent after `synced`, never dropped."""
    from agentlab.live import consumers
    from agentlab.runs.recorder import Recorder
    from traces.schema import Step as StepRecord

    run = await Run.objects.acreate(user=user, input="q", agent_name="t", paradigm="react",
                                    status="running")
    recorder = Recorder(run.pk)
    await recorder.step(StepRecord(seq=1, kind="llm", name="m", status="ok", text="first"))
    read_from_database = consumers.steps_after

    async def run_goes_on_while_it_reads(run_id: int, after: int, limit: int):
        rows = await read_from_database(run_id, after, limit)
        if after == 0:  # the read is done; these come too late for it
            await recorder.step(StepRecord(seq=2, kind="tool", name="calculator",
                                           status="ok", text="second"))
            await recorder.token(3, "Th")
        return rows

    monkeypatch.setattr(consumers, "steps_after", run_goes_on_while_it_reads)
    comm = await connect(run.pk, user)
    backfill = await synced(comm)
    assert [f["seq"] for f in backfill if f["type"] == "step"] == [1]
    assert backfill[-1] == {"type": "synced", "last_seq": 1}
    after = await frames_until(comm, is_type("token"), timeout=5)
    assert [(f["type"], f["seq"]) for f in after] == [("step", 2), ("token", 3)]
    assert "second" in after[0]["html"] and after[1]["delta"] == "Th"
    await comm.disconnect()
