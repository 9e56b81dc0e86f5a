"""The live path between processes, over a real Redis (channels-redis) and a second process
(tests/other_process.py): a run recorded in one process reaches a socket of another through
the run's group; a process's own events reach its sockets once (directly, never again through
the layer); a socket joins the run's group when admitted and leaves it when it closes."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from agentlab.bench.servers import database_url
from agentlab.runs import fanout
from agentlab.runs.recorder import Recorder
from agentlab.runs.registry import REGISTRY
from tests.other_process import TOKENS
from tests.sockets import connect, frames_until, is_type, new_seqs, synced
from tests.waiting import await_until
from traces.models import Run, Step
from traces.owners import process_id
from traces.schema import Step as StepRecord

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parent.parent


async def a_run(user, **fields) -> Run:
    return await Run.objects.acreate(user=user, input="What is 6*7?", agent_name="t",
                                     paradigm="react", **fields)


async def group_size(layer, run_id: int) -> int:
    """How many of this process's channels are in the run's group (the layer's own record),
    checked against Redis: the process is subscribed to the group exactly while one is."""
    import redis.asyncio

    loop_layer = layer._get_layer()
    group = loop_layer._get_group_channel_name(fanout.group_name(run_id))
    members = len(loop_layer.groups.get(group, ()))
    client = redis.asyncio.Redis.from_url(loop_layer._shards[0].host["address"])
    try:
        ((_name, subscribed),) = await client.pubsub_numsub(group)
    finally:
        await client.aclose()
    assert subscribed == (1 if members else 0), (members, subscribed)
    return members


async def in_group(layer, run_id: int, count: int) -> bool:
    return await group_size(layer, run_id) == count


async def test_a_run_recorded_by_another_process_streams_to_this_ones_socket(
        user, redis_layer, redis_url):
    run = await a_run(user, status="queued")
    comm = await connect(run.pk, user)
    await synced(comm)  # nothing recorded yet: all that follows comes through Redis
    env = {**os.environ, "REDIS_URL": redis_url,
           "DATABASE_URL": database_url(connection.settings_dict),
           "PYTHONPATH": str(ROOT)}
    other = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.other_process", str(run.pk), cwd=ROOT, env=env,
        stderr=asyncio.subprocess.PIPE)
    try:
        frames = await frames_until(comm, is_type("final"), timeout=15)
    finally:
        _, err = await asyncio.wait_for(other.communicate(), 20)
    assert other.returncode == 0, err.decode()[-2000:]
    assert new_seqs(frames) == [1, 2, 3]
    last = {f["seq"]: f for f in frames if f["type"] == "step"}
    assert all(f["status"] == "ok" for f in last.values()) and "42" in last[2]["html"]
    assert "".join(f["delta"] for f in frames if f["type"] == "token") == "".join(TOKENS)
    assert [f["status"] for f in frames if f["type"] == "status"] == ["running", "succeeded"]
    assert (frames[-1]["status"], frames[-1]["answer"]) == ("succeeded", "42")
    # The other process wrote the rows this one's page would read on a reload.
    assert await Step.objects.filter(run=run).acount() == 3
    await comm.disconnect()


async def test_this_processs_own_events_reach_its_socket_once(user, redis_layer):
    run = await a_run(user, status="running")
    comm = await connect(run.pk, user)
    await synced(comm)
    recorder = Recorder(run.pk)
    await recorder.step(StepRecord(seq=1, kind="tool", name="calculator", status="ok",
                                   text="42"))
    await recorder.token(2, "It")
    await await_until(lambda: run.pk not in REGISTRY.sending(), message="sent out to Redis")
    # Then an event of another process (as it would arrive: another origin). Every copy of
    # ours that came back through the group is ahead of it in this socket's channel.
    await redis_layer.group_send(fanout.group_name(run.pk), {
        "type": "run.token", "seq": 2, "delta": " is", "origin": "elsewhere:1/0@boot.place"})
    frames = await frames_until(comm, is_type("token", delta=" is"), timeout=10)
    assert [(f["type"], f["seq"]) for f in frames] == [("step", 1), ("token", 2), ("token", 2)]
    assert [f["delta"] for f in frames[1:]] == ["It", " is"]
    await comm.disconnect()


async def test_a_socket_is_in_its_runs_group_from_admission_until_it_closes(
        user, other_user, redis_layer):
    run = await a_run(user, status="running")
    assert await group_size(redis_layer, run.pk) == 0
    refused = await connect(run.pk, other_user)  # not theirs: joins nothing
    assert (await refused.receive_json_from())["type"] == "error"
    assert await group_size(redis_layer, run.pk) == 0
    first = await connect(run.pk, user)
    second = await connect(run.pk, user)
    # Joining and leaving finish after the accept and the close: wait for them.
    await await_until(lambda: in_group(redis_layer, run.pk, 2), message="both joined")
    assert fanout.watchers(run.pk) == 2
    await first.disconnect()
    await await_until(lambda: in_group(redis_layer, run.pk, 1), message="the first left")
    assert fanout.watchers(run.pk) == 1
    await second.disconnect()
    await await_until(lambda: in_group(redis_layer, run.pk, 0), message="the second left")
    assert fanout.watchers(run.pk) == 0


async def test_an_event_published_outside_any_event_loop_still_reaches_the_group(redis_layer):
    # A management command or a plain thread publishes with no loop running in it.
    channel = await redis_layer.new_channel()
    await redis_layer.group_add(fanout.group_name(7001), channel)
    await sync_to_async(fanout.publish)(7001, {"type": "run.status", "status": "cancelled"})
    got = await asyncio.wait_for(redis_layer.receive(channel), 5)
    assert (got["type"], got["status"], got["origin"]) == ("run.status", "cancelled", process_id())


async def test_a_burst_from_another_process_reaches_the_socket_whole(user, redis_layer):
    """500 events sent to the run's group while this process cannot drain them (its loop is
    blocked; as a busy daphne's is): nothing may be dropped on the way (the core layer of
    channels-redis dropped group sends past its per-channel capacity, silently). Every event
    arrives, in order."""
    import threading

    from channels.layers import DEFAULT_CHANNEL_LAYER, channel_layers

    from agentlab.runs.fanout import group_name

    run = await a_run(user, status="running")
    comm = await connect(run.pk, user)
    await synced(comm)
    await await_until(lambda: in_group(redis_layer, run.pk, 1), message="the socket joined")

    async def burst() -> None:  # another process's layer, as configured here
        layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
        for i in range(500):
            await layer.group_send(group_name(run.pk), {
                "type": "run.token", "seq": 1, "delta": f"{i} ", "origin": "another process"})
        await layer.flush()

    sender = threading.Thread(target=lambda: asyncio.run(burst()))
    sender.start()
    sender.join()  # blocks this loop: nothing is read from the channel meanwhile
    got = [(await comm.receive_json_from(timeout=10))["delta"] for _ in range(500)]
    assert got == [f"{i} " for i in range(500)]
    await comm.disconnect()


async def test_events_that_queue_up_go_out_as_one_batch_in_order(user, redis_layer):
    """Published faster than one send takes, a run's events leave in batches: fewer group
    messages than events, and unbatched they are every event, in order."""
    run = await a_run(user, status="running")
    listener = await redis_layer.new_channel()
    await redis_layer.group_add(fanout.group_name(run.pk), listener)
    for i in range(50):  # no await between: they queue behind the first send
        fanout.publish(run.pk, {"type": "run.token", "seq": 1, "delta": str(i)})
    got, messages = [], 0
    while len(got) < 50:
        message = await asyncio.wait_for(redis_layer.receive(listener), 10)
        messages += 1
        got += [e["delta"] for e in fanout.unbatched(message)]
    assert got == [str(i) for i in range(50)]
    assert messages < 50
    # Its sender leaves the run's entry once everything is out (other runs' may still send).
    await await_until(lambda: run.pk not in REGISTRY.sending(), message="the sender finished")


async def test_a_sender_whose_loop_ended_leaves_nothing_and_the_next_event_goes_out(
        user, redis_layer):
    """A command or thread publishes on a loop of its own that ends while an event is still
    on its way out: the sender is cancelled with its loop, and must not stay in the run's
    entry, where every later event of the run would wait behind it for ever."""
    run = await a_run(user, status="running")
    listener = await redis_layer.new_channel()
    await redis_layer.group_add(fanout.group_name(run.pk), listener)

    async def publish_and_leave() -> None:  # its loop ends before the sender has sent
        fanout.publish(run.pk, {"type": "run.token", "seq": 1, "delta": "cut"})

    await sync_to_async(lambda: asyncio.run(publish_and_leave()), thread_sensitive=False)()
    assert run.pk not in REGISTRY.sending()
    fanout.publish(run.pk, {"type": "run.token", "seq": 1, "delta": "next"})
    deltas = []
    while "next" not in deltas:
        message = await asyncio.wait_for(redis_layer.receive(listener), 10)
        deltas += [e["delta"] for e in fanout.unbatched(message)]
    await await_until(lambda: run.pk not in REGISTRY, message="the run's entry is gone")


def test_one_event_goes_alone_and_several_go_as_one_batch_with_their_origin():
    one = {"type": "run.token", "seq": 1, "delta": "a", "origin": "here"}
    two = {"type": "run.token", "seq": 1, "delta": "b", "origin": "here"}
    assert fanout.batched([one]) is one
    assert fanout.batched([one, two]) == {"type": fanout.BATCH, "events": [one, two],
                                          "origin": "here"}
    assert fanout.unbatched(fanout.batched([one, two])) == [one, two]
    assert fanout.unbatched(one) == [one]


async def test_a_batch_holds_at_most_max_batch_events_and_the_run_is_sending_meanwhile(
        user, redis_layer):
    run = await a_run(user, status="running")
    listener = await redis_layer.new_channel()
    await redis_layer.group_add(fanout.group_name(run.pk), listener)
    total = 2 * fanout.MAX_BATCH + 50
    for i in range(total):  # no await between: all of them wait for the first send
        fanout.publish(run.pk, {"type": "run.token", "seq": 1, "delta": str(i)})
    assert run.pk in REGISTRY.sending()  # the run's entry holds its sender while it sends
    sizes, got = [], []
    while len(got) < total:
        events = fanout.unbatched(await asyncio.wait_for(redis_layer.receive(listener), 10))
        sizes.append(len(events))
        got += [e["delta"] for e in events]
    assert got == [str(i) for i in range(total)] and max(sizes) == fanout.MAX_BATCH
    await await_until(lambda: run.pk not in REGISTRY.sending(), message="the sender finished")


async def test_this_processs_own_batched_events_reach_its_socket_once(user, redis_layer):
    """Events that left as one batch come back through the layer with this process's origin:
    the socket, which had them directly, must not get them twice."""
    run = await a_run(user, status="running")
    comm = await connect(run.pk, user)
    await synced(comm)
    await await_until(lambda: in_group(redis_layer, run.pk, 1), message="the socket joined")
    for i in range(20):  # queued behind the first send: they leave as batches
        fanout.publish(run.pk, {"type": "run.token", "seq": 1, "delta": str(i)})
    got = [(await comm.receive_json_from(timeout=5))["delta"] for _ in range(20)]
    assert got == [str(i) for i in range(20)]
    await await_until(lambda: run.pk not in REGISTRY.sending(), message="the sender finished")
    assert await comm.receive_nothing(timeout=0.5)  # no event came a second time
    await comm.disconnect()


async def test_only_a_layer_that_reaches_other_processes_carries_the_events(redis_layer,
                                                                           settings):
    assert fanout.remote_layer() is redis_layer
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    assert fanout.remote_layer() is None  # this process's sockets already had every event
