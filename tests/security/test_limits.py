"""The limits a user can expect: runs going at once per user (wherever the browser starts one),
an approval's time to live, a slow socket's bounded outbox, and a sync's backfill in pages.

Real parts: the ASGI app, the database, runs on the scripted model server. The limits are
lowered through Django's settings (pytest-django's `settings`), as an operator would set them."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.utils import timezone

from agentlab.asgi import application
from agentlab.chat.models import ChatTurn, Conversation
from agentlab.compare.models import Comparison, ComparisonEntry
from agentlab.evals.models import Case, Experiment, Suite
from agentlab.live import consumers
from agentlab.models import Tool
from agentlab.runs import room
from agentlab.runs.snapshot import create_run
from tests.factories import make_agents, scripted_profile
from tests.fake_openai import Reply
from tests.sockets import (
    ANSWER,
    CALL,
    connect,
    frames_until,
    headers,
    is_type,
    new_seqs,
    synced,
)
from traces.display.renderer import first_steps_html
from traces.models import Run, Step

pytestmark = pytest.mark.django_db(transaction=True)


def going(agent, user, n: int = 1, status: str = "running") -> list[Run]:
    """`n` runs of `user` that hold a place (a process claimed them)."""
    made = []
    for _ in range(n):
        run = create_run(agent, user, "busy")
        Run.objects.filter(pk=run.pk).update(status=status, worker="elsewhere:1")
        made.append(run)
    return made


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


# -- runs going at once, per user ---------------------------------------------------------------

def test_what_holds_a_place(agent, user, other_user, settings):
    settings.AGENTLAB_MAX_ACTIVE_RUNS = 2
    going(agent, user, 1, "paused")
    going(agent, other_user, 5)  # another user's runs are theirs to count
    create_run(agent, user, "never started")  # a one-off run nobody started holds none
    done = going(agent, user, 1)[0]
    Run.objects.filter(pk=done.pk).update(status="succeeded")
    room.ensure_room(user)  # one place left
    going(agent, user, 1, "queued")  # claimed by a process: it holds one
    with pytest.raises(room.RunLimit, match="You already have 2 runs going and one user may "
                                             "have 2 at once"):
        room.ensure_room(user)
    settings.AGENTLAB_MAX_ACTIVE_RUNS = 0  # no limit
    room.ensure_room(user, 100)


def test_a_one_off_run_over_the_limit_is_refused_and_nothing_is_queued(
        agent, user, settings):
    settings.AGENTLAB_MAX_ACTIVE_RUNS = 1
    going(agent, user)
    response = logged_in(user).post("/chat/run/", {"agent": agent.pk, "question": "6*7?"},
                                    follow=True)
    assert "You already have 1 run going" in response.content.decode()
    assert Run.objects.count() == 1


async def test_starting_a_queued_run_over_the_limit_is_refused(agent, user, settings):
    queued = await sync_to_async(create_run)(agent, user, "What is 6*7?")
    comm = await connect(queued.pk, user)
    await synced(comm)
    settings.AGENTLAB_MAX_ACTIVE_RUNS = 1
    await sync_to_async(going)(agent, user)  # started elsewhere meanwhile
    await comm.send_json_to({"action": "start"})
    error = await comm.receive_json_from()
    assert error["type"] == "error" and "cannot start" in error["error"]
    run = await Run.objects.aget(pk=queued.pk)
    assert (run.status, run.worker) == ("queued", "")  # not claimed: it can start later
    await comm.disconnect()


async def test_a_chat_turn_over_the_limit_is_refused_and_adds_no_turn(agent, user,
                                                                       settings, fake_llm):
    conversation = await Conversation.objects.acreate(user=user, agent=agent)
    settings.AGENTLAB_MAX_ACTIVE_RUNS = 1
    await sync_to_async(going)(agent, user)
    hdrs = await sync_to_async(headers)(user)
    comm = WebsocketCommunicator(application, f"/ws/chat/{conversation.pk}/", headers=hdrs)
    assert (await comm.connect())[0]
    await comm.send_json_to({"action": "start", "message": "Hi"})
    error = await comm.receive_json_from()
    assert error["type"] == "error" and "You already have 1 run going" in error["error"]
    await comm.disconnect()
    assert not await ChatTurn.objects.aexists() and await Run.objects.acount() == 1
    assert fake_llm.requests == []


def test_a_comparison_needs_room_for_all_its_runs(user, settings, fake_llm):
    settings.AGENTLAB_MAX_ACTIVE_RUNS = 2
    agents = make_agents(scripted_profile(fake_llm.base_url), 3)
    going(agents[0], user)
    response = logged_in(user).post("/compare/", {"question": "6*7?",
                                                  "agents": [a.pk for a in agents[:2]]})
    assert response.status_code == 200
    assert "so 2 more runs cannot start" in response.content.decode()
    assert not Comparison.objects.exists() and Run.objects.count() == 1


def test_a_comparisons_rerun_over_the_limit_adds_no_round(user, other_user, settings,
                                                          fake_llm):
    agents = make_agents(scripted_profile(fake_llm.base_url), 2)
    comparison = Comparison.objects.create(user=user, question="6*7?")
    for position, a in enumerate(agents):
        run = create_run(a, user, "6*7?")
        Run.objects.filter(pk=run.pk).update(status="succeeded")
        ComparisonEntry.objects.create(comparison=comparison, position=position, agent=a,
                                       run=run)
    settings.AGENTLAB_MAX_ACTIVE_RUNS = 2
    going(agents[0], user)
    response = logged_in(user).post(f"/compare/{comparison.pk}/rerun/", follow=True)
    assert "so 2 more runs cannot start" in response.content.decode()
    assert comparison.entries.count() == 2 and comparison.last_round == 1


def test_an_experiment_needs_room_for_its_concurrency(user, settings, fake_llm):
    settings.AGENTLAB_MAX_ACTIVE_RUNS = 3
    agents = make_agents(scripted_profile(fake_llm.base_url), 2)
    suite = Suite.objects.create(name="Sums")
    for position in range(3):
        Case.objects.create(suite=suite, position=position, question="2+2?", expected="4")
    going(agents[0], user, 2)
    form = {"suite": suite.pk, "agents": [a.pk for a in agents], "concurrency": 2}
    response = logged_in(user).post("/evals/", form)
    assert response.status_code == 200
    assert "so 2 more runs cannot start" in response.content.decode()
    assert not Experiment.objects.exists()


# -- an approval's time to live -----------------------------------------------------------------

async def test_an_approval_nobody_gives_expires_and_the_run_goes_on(agent, user, fake_llm,
                                                                    settings, stop_runs):
    settings.AGENTLAB_APPROVAL_TTL_S = 1
    await Tool.objects.filter(name="calculator").aupdate(needs_approval=True)
    fake_llm.script(CALL, Reply(text="I could not calculate it."))
    run = await sync_to_async(create_run)(agent, user, "What is 6*7?")
    comm = await connect(run.pk, user)
    await synced(comm)
    asked = timezone.now().timestamp()
    await comm.send_json_to({"action": "start"})
    frames = await frames_until(comm, is_type("approval"))
    assert 0.5 < frames[-1]["expires_at"] - asked < 3
    frames = await frames_until(comm, is_type("final"), timeout=15)  # nobody decides
    assert frames[-1]["status"] == "succeeded"
    rows = {s.kind: s async for s in Step.objects.filter(run=run.pk)}
    assert rows["approval"].output["approved"] is False
    assert "within 1 s, so the approval expired" in rows["approval"].output["reason"]
    assert rows["tool"].status == "error" and "the approval expired" in rows["tool"].text
    assert "the approval expired" in str(fake_llm.requests[1]["messages"])  # the model knows
    await comm.disconnect()


# -- a slow socket ------------------------------------------------------------------------------

class SlowReader:
    """The ASGI app behind a client that stops reading: while `reading` is clear, a frame
    being sent waits (as it would under a server that applies backpressure); a close goes."""

    def __init__(self, app: Any) -> None:
        self.app, self.reading = app, asyncio.Event()
        self.reading.set()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        async def slow_send(message: dict) -> None:
            if message["type"] == "websocket.send":
                await self.reading.wait()
            await send(message)

        await self.app(scope, receive, slow_send)


async def test_a_socket_that_falls_behind_is_closed_to_resync_and_loses_nothing(
        agent, user, fake_llm, settings, stop_runs):
    settings.AGENTLAB_SOCKET_OUTBOX = 3
    fake_llm.script(CALL, ANSWER)
    run = await sync_to_async(create_run)(agent, user, "What is 6*7?")
    app = SlowReader(application)
    hdrs = await sync_to_async(headers)(user)
    slow = WebsocketCommunicator(app, f"/ws/runs/{run.pk}/", headers=hdrs)
    assert (await slow.connect())[0]
    await synced(slow)
    app.reading.clear()  # the browser stops reading; the run's events pile up for it
    await slow.send_json_to({"action": "start"})
    assert await slow.receive_output(timeout=10) == {"type": "websocket.close", "code": 1013}
    app.reading.set()
    while not await slow.receive_nothing(timeout=0.3):  # frames held up before the close
        await slow.receive_output()
    # Closed for falling behind: whatever it still sends before it goes is not acted on.
    await slow.send_json_to({"action": "sync", "last_seq": 0})
    assert await slow.receive_nothing(timeout=0.5)
    await slow.disconnect()
    # The browser reconnects and syncs: everything the run recorded is there.
    again = await connect(run.pk, user)
    frames = await synced(again)
    if not any(f["type"] == "final" for f in frames):
        frames += await frames_until(again, is_type("final"))
    final = next(f for f in frames if f["type"] == "final")
    assert new_seqs(frames) == [1, 2, 3, 4] and final["answer"] == "6 times 7 is 42."
    await again.disconnect()


# -- the backfill in pages ----------------------------------------------------------------------

def nested_run(agent, user, n: int) -> Run:
    """A finished run of `n` steps: 1 to 5 a chain, each the child of the one before (depths
    0 to 4), then a root and its child."""
    run = create_run(agent, user, "nested")
    now = timezone.now()
    for seq in range(1, n + 1):
        parent = seq - 1 if 1 < seq <= 5 or seq == 7 else None
        Step.objects.create(run=run, seq=seq, kind="thought", text=f"thought {seq}",
                            parent=parent, started_at=now)
    Run.objects.filter(pk=run.pk).update(status="succeeded", final_answer="done",
                                         started_at=now, step_count=n)
    return Run.objects.get(pk=run.pk)


@pytest.mark.parametrize("last_seq", [0, 3])
async def test_sync_sends_the_missing_steps_a_page_at_a_time(agent, user, settings,
                                                             monkeypatch, last_seq):
    settings.AGENTLAB_BACKFILL_PAGE = 2
    run = await sync_to_async(nested_run)(agent, user, 7)
    reads: list[int] = []
    read = consumers.steps_after

    async def counted(run_id: int, after: int, limit: int) -> list[dict]:
        page = await read(run_id, after, limit)
        reads.append(len(page))
        return page

    monkeypatch.setattr(consumers, "steps_after", counted)
    comm = await connect(run.pk, user)
    frames = await synced(comm, last_seq=last_seq)
    steps = [f for f in frames if f["type"] == "step"]
    assert [f["seq"] for f in steps] == list(range(last_seq + 1, 8))
    assert reads == ([2, 2, 2, 1] if last_seq == 0 else [2, 2, 0])  # 0: none left
    assert [f["type"] for f in frames[len(steps):]] == ["status", "final", "synced"]
    assert frames[-1] == {"type": "synced", "last_seq": 7}
    # Each step sits where the run page puts it, its parent read from an earlier page or not.
    whole = await sync_to_async(first_steps_html)(run, 10)
    assert [f["html"] for f in steps] == whole[last_seq:]
    depths = [int(re.search(r'data-depth="(\d+)"', html)[1]) for html in whole]
    assert depths == [0, 1, 2, 3, 4, 0, 1]  # so the comparison above sees the tree
    await comm.disconnect()
