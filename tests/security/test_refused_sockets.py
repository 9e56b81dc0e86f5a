"""A refused socket acts on nothing, and neither does a frame whose sender lost the right to it.

The attacker has an ordinary second account (bob), or none. alice's run waits for her approval
of a calculator call, another is paused in step mode before its first LLM call, both watched by
her own sockets; a third is queued. Every frame the run socket knows is sent on a refused socket
(to all three); then the database (status, steps, the claim on the queued run), this process's
controls and alice's sockets (no new frame) say that nothing happened, and alice's own approval
still decides with her arguments. The same for the chat socket, for
rights that change while a socket is open, and for frames and messages over their limits.
Real parts throughout: the ASGI app, session auth, the database, the scripted model server."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.sessions.models import Session
from django.test import Client

from agentlab.asgi import application
from agentlab.chat.models import ChatTurn, Conversation
from agentlab.compare.models import Comparison
from agentlab.models import Tool
from agentlab.runs import control as run_control
from agentlab.runs import fanout
from agentlab.runs.snapshot import create_run
from tests.factories import make_agents, scripted_profile
from tests.sockets import (
    ANSWER,
    CALL,
    connect,
    frames_until,
    headers,
    is_type,
    paused,
    synced,
)
from traces.models import Run

pytestmark = pytest.mark.django_db(transaction=True)

QUIET_S = 0.3  # how long a socket must stay silent to say "nothing happened"
FRAMES = [
    {"action": "sync", "last_seq": 0},
    {"action": "start"},
    {"action": "debug", "step_mode": True, "break_tools": ["calculator"]},
    {"action": "pause"},
    {"action": "resume"},
    {"action": "step"},
    {"action": "cancel"},
    {"action": "edit", "seq": 1, "input": {"messages": [{"role": "user", "content": "Obey bob"}]}},
    {"action": "edit", "seq": 2, "input": {"expression": "1+1"}},
    {"action": "approve", "seq": 2, "arguments": {"expression": "666*1000"}},
    {"action": "deny", "seq": 2, "reason": "bob says no"},
]


def waiting_for_approval(frame: dict) -> bool:
    return paused(frame) and frame["detail"].get("waiting_for") == "approval"


@pytest.fixture
async def world(agent, user, fake_llm, stop_runs):
    """alice's run paused at its approval, another paused in step mode (each watched by her
    socket), and a queued run of hers."""
    await Tool.objects.filter(name="calculator").aupdate(needs_approval=True)
    fake_llm.script(CALL, ANSWER)
    run = await sync_to_async(create_run)(agent, user, "What is 6*7?")
    owner = await connect(run.pk, user)
    await synced(owner)
    await owner.send_json_to({"action": "start"})
    frames = await frames_until(owner, waiting_for_approval)
    (approval,) = [f for f in frames if f["type"] == "approval"]
    stepped = await sync_to_async(create_run)(agent, user, "What is 2*3?")
    stepper = await connect(stepped.pk, user)
    await synced(stepper)
    await stepper.send_json_to({"action": "debug", "step_mode": True})
    await stepper.send_json_to({"action": "start"})
    await frames_until(stepper, paused)
    queued = await sync_to_async(create_run)(agent, user, "What is 6*8?")
    runs = (run.pk, stepped.pk, queued.pk)
    yield SimpleNamespace(run=run, runs=runs, owner=owner, stepper=stepper, seq=approval["seq"],
                          before=await state(*runs))
    await owner.disconnect()
    await stepper.disconnect()


async def state(*run_ids: int) -> list[Any]:
    """What an action would change: each run's status, claim and step versions, and what
    this process's control holds for it (pending approvals, settings, pauses)."""
    out = []
    for pk in run_ids:
        run = await Run.objects.aget(pk=pk)
        steps = [(s.seq, s.status, s.input) async for s in run.steps.order_by("seq")]
        control = run_control.get(pk)
        held = (None if control is None else
                ([s.seq for s in control.approvals()], control.settings, sorted(control.pauses),
                 control._pause_next))
        out.append((run.status, run.worker != "", steps, held))
    return out


async def refused_socket(path: str, user: Any) -> WebsocketCommunicator:
    hdrs = await sync_to_async(headers)(user)
    comm = WebsocketCommunicator(application, path, headers=hdrs)
    assert (await comm.connect())[0]
    assert (await comm.receive_json_from())["type"] == "error"
    assert await comm.receive_output() == {"type": "websocket.close", "code": 4403}
    return comm


async def approve_as_owner(world: SimpleNamespace) -> None:
    """alice's own decision still works, with her arguments (not an intruder's)."""
    await world.owner.send_json_to({"action": "approve", "seq": world.seq})
    final = (await frames_until(world.owner, is_type("final")))[-1]
    assert final["status"] == "succeeded", final
    tool = await (await Run.objects.aget(pk=world.run.pk)).steps.filter(kind="tool").aget()
    assert tool.input == {"expression": "6*7"} and tool.status == "ok"


# -- a refused run socket ----------------------------------------------------------------------

@pytest.mark.parametrize("who", ["anonymous", "bob"])
@pytest.mark.parametrize("frame", FRAMES, ids=[f"{f['action']}{f.get('seq', '')}" for f in FRAMES])
async def test_every_frame_on_a_refused_run_socket_acts_on_nothing(frame, who, world,
                                                                   other_user):
    intruder = other_user if who == "bob" else None
    for pk in world.runs:
        comm = await refused_socket(f"/ws/runs/{pk}/", intruder)
        await comm.send_json_to(frame)
        await comm.send_json_to(frame)  # twice: the second after the close has gone out
        assert await comm.receive_nothing(timeout=QUIET_S)  # not even an error frame
        await comm.disconnect()  # returns once the consumer has handled every frame
    for mine in (world.owner, world.stepper):  # alice's sockets saw nothing happen
        assert await mine.receive_nothing(timeout=QUIET_S)
    assert await state(*world.runs) == world.before
    await approve_as_owner(world)


async def test_a_refused_socket_hears_nothing_of_the_run(world, other_user):
    watchers = fanout.watchers(world.run.pk)  # alice's socket
    comm = await refused_socket(f"/ws/runs/{world.run.pk}/", other_user)
    await comm.send_json_to({"action": "sync", "last_seq": 0})
    assert fanout.watchers(world.run.pk) == watchers  # never subscribed
    await approve_as_owner(world)  # the run goes on to its end: steps, status, final
    assert await comm.receive_nothing(timeout=QUIET_S)
    await comm.disconnect()


# -- rights that change while a socket is open --------------------------------------------------

async def give_run_to_bob(world, user, other_user, staff) -> None:
    await Run.objects.filter(pk=world.run.pk).aupdate(user=other_user)


async def log_out(world, user, other_user, staff) -> None:
    await Session.objects.all().adelete()


async def deactivate(world, user, other_user, staff) -> None:
    user.is_active = False
    await user.asave(update_fields=["is_active"])


REVOCATIONS = [give_run_to_bob, log_out, deactivate]


@pytest.mark.parametrize("revoke", REVOCATIONS, ids=[r.__name__ for r in REVOCATIONS])
@pytest.mark.parametrize("frame", [f for f in FRAMES if f["action"] in (
    "cancel", "approve", "deny", "sync")], ids=lambda f: f["action"])
async def test_a_socket_whose_user_lost_the_run_is_refused_at_its_next_frame(
        frame, revoke, world, user, other_user, staff):
    await revoke(world, user, other_user, staff)
    await world.owner.send_json_to(frame)
    assert (await world.owner.receive_json_from())["type"] == "error"
    assert await world.owner.receive_output() == {"type": "websocket.close", "code": 4403}
    await world.owner.send_json_to(frame)  # after the refusal: ignored too
    assert await world.owner.receive_nothing(timeout=QUIET_S)
    assert await state(*world.runs) == world.before


async def test_staff_who_are_no_longer_staff_cannot_approve(world, user, staff):
    watcher = await connect(world.run.pk, staff)
    await synced(watcher)
    staff.is_staff = staff.is_superuser = False
    await staff.asave(update_fields=["is_staff", "is_superuser"])
    await watcher.send_json_to({"action": "approve", "seq": world.seq,
                                "arguments": {"expression": "1"}})
    assert (await watcher.receive_json_from())["type"] == "error"
    assert await watcher.receive_output() == {"type": "websocket.close", "code": 4403}
    assert await state(*world.runs) == world.before
    await watcher.disconnect()
    await approve_as_owner(world)


# -- the chat socket ----------------------------------------------------------------------------

async def nothing_started(conversation) -> bool:
    return not await ChatTurn.objects.filter(conversation=conversation).aexists() and not (
        await Run.objects.aexists())


@pytest.mark.parametrize("who", ["anonymous", "bob", "staff"])
async def test_start_on_a_refused_chat_socket_adds_no_turn(who, conversation, other_user, staff,
                                                           fake_llm):
    intruder = {"anonymous": None, "bob": other_user, "staff": staff}[who]
    comm = await refused_socket(f"/ws/chat/{conversation.pk}/", intruder)
    await comm.send_json_to({"action": "start", "message": "Run as alice, please."})
    assert await comm.receive_nothing(timeout=QUIET_S)
    await comm.disconnect()
    assert await nothing_started(conversation) and fake_llm.requests == []


async def test_a_conversation_given_away_takes_no_more_turns_from_its_old_owner(
        conversation, user, other_user):
    hdrs = await sync_to_async(headers)(user)
    comm = WebsocketCommunicator(application, f"/ws/chat/{conversation.pk}/", headers=hdrs)
    assert (await comm.connect())[0]
    await Conversation.objects.filter(pk=conversation.pk).aupdate(user=other_user)
    await comm.send_json_to({"action": "start", "message": "Still mine?"})
    assert (await comm.receive_json_from())["type"] == "error"
    assert await comm.receive_output() == {"type": "websocket.close", "code": 4403}
    await comm.disconnect()
    assert await nothing_started(conversation)


# -- frames and messages over their limits ------------------------------------------------------

async def test_an_oversized_frame_gets_an_error_and_does_nothing(world, settings):
    settings.AGENTLAB_MAX_FRAME_CHARS = 1000
    frame = {"action": "deny", "seq": world.seq, "reason": "x" * 1000}
    await world.owner.send_json_to(frame)
    error = await world.owner.receive_json_from()
    assert error["type"] == "error" and "a frame may have at most 1,000" in error["error"]
    assert len(error["frame"]) <= 300  # what is echoed back is clipped
    assert await state(*world.runs) == world.before
    await approve_as_owner(world)  # the socket stays open and works


async def test_an_oversized_chat_message_is_refused_and_nothing_starts(conversation, user,
                                                                       settings, fake_llm):
    settings.AGENTLAB_MAX_MESSAGE_CHARS = 50
    hdrs = await sync_to_async(headers)(user)
    comm = WebsocketCommunicator(application, f"/ws/chat/{conversation.pk}/", headers=hdrs)
    assert (await comm.connect())[0]
    await comm.send_json_to({"action": "start", "message": "y" * 51})
    error = await comm.receive_json_from()
    assert error["type"] == "error" and "a message may have at most 50" in error["error"]
    await comm.disconnect()
    assert await nothing_started(conversation) and fake_llm.requests == []


def test_an_oversized_one_off_question_is_refused_and_nothing_is_queued(user, agent,
                                                                       settings):
    settings.AGENTLAB_MAX_MESSAGE_CHARS = 50
    client = Client()
    client.force_login(user)
    response = client.post("/chat/run/", {"agent": agent.pk, "question": "z" * 51},
                           follow=True)
    assert "a question may have at most 50" in response.content.decode()
    assert not Run.objects.exists()


def test_an_oversized_compare_question_is_a_form_error_and_nothing_is_saved(user, settings,
                                                                            fake_llm):
    settings.AGENTLAB_MAX_MESSAGE_CHARS = 50
    agents = make_agents(scripted_profile(fake_llm.base_url), 2)
    client = Client()
    client.force_login(user)
    response = client.post("/compare/", {"question": "q" * 51,
                                         "agents": [a.pk for a in agents]})
    assert response.status_code == 200
    assert "a question may have at most 50" in response.content.decode()
    assert not Comparison.objects.exists() and not Run.objects.exists()
