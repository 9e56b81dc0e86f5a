"""The run registry (agentlab/runs/registry.py): which runs this process holds, and nothing more.

Real runs of a function-calling ReAct agent on the scripted model (tests/fake_openai.py, real
HTTP), launched as the sockets launch them (agentlab.runs.control.start), recorded in the real
database; a watcher is a real socket through Channels' communicator where it matters.
"""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async

from agentlab.runs import control as run_control
from agentlab.runs import execution, fanout
from agentlab.runs.registry import REGISTRY
from agentlab.runs.snapshot import create_run
from tests.fake_openai import Reply
from tests.sockets import connect, synced
from tests.waiting import await_until
from traces.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fresh_registry():
    """Start from an empty registry. An earlier test may leave a run going that it never
    awaited (its entry goes when that run ends), and SQLite hands out its run ids again, so
    such a leftover could sit under one of this test's ids. The asserts below still look only
    at this test's own runs: a leftover that publishes during the test adds its own entry."""
    REGISTRY._entries.clear()
    yield


def mine(run_ids) -> object:
    """The registry's view restricted to these runs: (executing here, any entry)."""
    ids = set(run_ids)
    return ([pk for pk in REGISTRY.held() if pk in ids],
            sorted(e.run_id for e in REGISTRY.entries() if e.run_id in ids))

CALL = Reply(tool_calls=[("calculator", '{"expression": "6*7"}')])
ANSWER = Reply(text="6 times 7 is 42.")


async def new_run(agent, user, question: str = "What is 6*7?") -> Run:
    return await sync_to_async(create_run)(agent, user, question)


async def gone(*run_ids: int) -> None:
    """Until the process holds nothing of these runs (a task's done callbacks run a turn
    after it ends)."""
    await await_until(lambda: not any(pk in REGISTRY for pk in run_ids),
                      message=f"the registry lets go of runs {run_ids}")


async def test_a_launched_run_is_held_until_its_task_ends_and_then_gone(calc_agent, user,
                                                                        fake_llm):
    """Scripted model: one tool call, then the answer."""
    fake_llm.script(CALL, ANSWER)
    run = await new_run(calc_agent, user)
    control = run_control.start(run)
    entry = REGISTRY.entry(run.pk)
    assert entry is not None and entry.control is control and run_control.get(run.pk) is control
    assert mine([run.pk]) == ([run.pk], [run.pk]) and REGISTRY.task(run.pk) is entry.task
    outcome = await entry.task
    assert outcome.status == "succeeded"
    await gone(run.pk)
    assert mine([run.pk]) == ([], []) and run_control.get(run.pk) is None
    assert execution.cancel(run.pk) is False  # nothing here to cancel any more
    assert (await Run.objects.aget(pk=run.pk)).status == "succeeded"


async def test_a_batch_of_watched_runs_leaves_nothing_behind(calc_agent, user, fake_llm):
    """Scripted model: each run answers at once. Every run was watched by a subscriber that
    saw its end; once the runs end and the watchers leave, the registry is empty."""
    fake_llm.responder = lambda body: Reply(text="42.")
    runs = [await new_run(calc_agent, user, f"question {i}") for i in range(8)]
    heard: dict[int, list[dict]] = {run.pk: [] for run in runs}
    watchers = {run.pk: heard[run.pk].append for run in runs}
    for run in runs:
        fanout.subscribe(run.pk, watchers[run.pk])
    controls = [run_control.start(run) for run in runs]
    assert sorted(mine(heard)[0]) == sorted(heard)
    outcomes = await asyncio.gather(*[REGISTRY.task(c.run_id) for c in controls])
    assert [o.status for o in outcomes] == ["succeeded"] * len(runs)
    for run in runs:
        assert heard[run.pk][-1]["type"] == "run.status"
        assert heard[run.pk][-1]["status"] == "succeeded"
    # Still watched after the end: held only as watched, no longer executing here.
    await await_until(lambda: mine(heard)[0] == [], message="every task let go")
    assert all(REGISTRY.entry(pk).watched for pk in heard)
    for pk, watcher in watchers.items():
        fanout.unsubscribe(pk, watcher)
    await gone(*heard)  # on Redis: once the last events have gone out to other processes
    assert mine(heard) == ([], [])


async def test_a_run_watched_but_not_executed_here_is_held_only_as_watched(calc_agent, user):
    """A socket on a queued run nobody started: the process holds the watcher, nothing else;
    its events still reach the socket; when the socket goes, so does the entry."""
    run = await new_run(calc_agent, user)
    comm = await connect(run.pk, user)
    await synced(comm)
    entry = REGISTRY.entry(run.pk)
    assert entry is not None and entry.watched and not entry.executing
    assert (entry.task, entry.context, entry.control) == (None, None, None)
    assert run.pk not in REGISTRY.held() and fanout.watchers(run.pk) == 1
    assert execution.cancel(run.pk) is False and run_control.get(run.pk) is None
    fanout.publish(run.pk, {"type": "run.token", "seq": 1, "delta": "hello"})
    assert (await comm.receive_json_from(timeout=5))["delta"] == "hello"
    await comm.disconnect()
    await gone(run.pk)
    assert fanout.watchers(run.pk) == 0


async def test_held_lists_exactly_the_runs_executing_here(calc_agent, user, fake_llm):
    """Scripted model. Two runs paused in step mode are held; a watched one is not; after
    both are cancelled none is."""
    fake_llm.script(CALL, ANSWER, CALL, ANSWER)
    first, second, watched = [await new_run(calc_agent, user) for _ in range(3)]
    listener: list[dict] = []
    fanout.subscribe(watched.pk, listener.append)
    debug = run_control.DebugSettings(step_mode=True)
    controls = [run_control.start(run, debug) for run in (first, second)]
    await await_until(lambda: all(c.pauses for c in controls), message="both runs pause")
    ours = (first.pk, second.pk, watched.pk)
    assert mine(ours) == ([first.pk, second.pk], sorted(ours))
    assert all(REGISTRY.entry(pk).context is not None for pk in (first.pk, second.pk))
    for control in controls:
        control.cancel()
    outcomes = await asyncio.gather(*[REGISTRY.task(r.pk) for r in (first, second)])
    assert [o.status for o in outcomes] == ["cancelled", "cancelled"]
    await gone(first.pk, second.pk)
    assert mine(ours) == ([], [watched.pk])
    fanout.unsubscribe(watched.pk, listener.append)
    await gone(watched.pk)
    assert mine(ours) == ([], [])


def test_an_entry_goes_only_when_nothing_of_its_run_is_left():
    """The registry's own rule, without a run: parts come and go; a newer part stays when an
    older one is cleared; the entry goes with its last part."""
    REGISTRY.put(7, control="a control", context=None)
    REGISTRY.hold(7).subscribers.append(print)
    REGISTRY.clear(7, "control")
    assert 7 in REGISTRY and 7 not in REGISTRY.held()
    REGISTRY.hold(7).subscribers.remove(print)
    REGISTRY.release(7)
    assert 7 not in REGISTRY
    REGISTRY.put(7, lane="new lane")
    REGISTRY.clear(7, "lane", only="old lane")  # an older lane's end keeps the new one
    assert REGISTRY.entry(7).lane == "new lane"
    REGISTRY.clear(7, "lane", only="new lane")
    assert 7 not in REGISTRY
    with pytest.raises(TypeError):
        REGISTRY.put(7, tusk=None)
    assert 7 not in REGISTRY
