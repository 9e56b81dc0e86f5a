"""A run's live events, handed straight to the sockets of this process that watch it.

Why not the channel layer for these: a group message reaches a consumer through a queue, a
receive task and the consumer's dispatch, each one more turn of the event loop; with twenty
busy runs a turn is tens of milliseconds, and a step waited through several of them
(`manage.py bench_live`). Here the recorder calls each watcher once the step's row is written,
in the same turn. The channel layer still carries the events to other processes when it is one
that can (Redis); the in-memory layer cannot, so it is not used for them.

A subscriber is a plain callable that must not block: a consumer queues or sends a frame.
Events sent to other processes carry this one's worker id (`origin`), so a consumer that hears
them through the layer as well skips its own (`from_elsewhere`).

A run's subscribers and its queue of events on their way out live in its entry of the run
registry (agentlab/runs/registry.py), which drops the entry once nothing of the run is left.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer

from agentlab.runs.registry import REGISTRY, Subscriber
from traces.owners import process_id

log = logging.getLogger(__name__)


def group_name(run_id: int) -> str:
    """The channel-layer group of a run's watchers in other processes."""
    return f"run-{run_id}"


def subscribe(run_id: int, subscriber: Subscriber) -> None:
    REGISTRY.hold(run_id).subscribers.append(subscriber)


def unsubscribe(run_id: int, subscriber: Subscriber) -> None:
    entry = REGISTRY.entry(run_id)
    if entry is None:
        return
    if subscriber in entry.subscribers:
        entry.subscribers.remove(subscriber)
    REGISTRY.release(run_id)


def publish(run_id: int, message: dict[str, Any]) -> None:
    """Give `message` to every watcher of the run in this process, now, in subscription order;
    then, in the same order, to the run's group when the channel layer reaches other
    processes."""
    entry = REGISTRY.entry(run_id)
    subscribers = list(entry.subscribers) if entry is not None else []
    for subscriber in subscribers:
        try:
            subscriber(message)
        except Exception:  # one broken socket must not keep the others from the step
            log.exception("a watcher of run %s failed on %s", run_id, message.get("type"))
    if (layer := remote_layer()) is not None:
        _send_out(layer, run_id, {**message, "origin": process_id()})


def from_elsewhere(message: dict[str, Any]) -> bool:
    """An event that came through the layer from another process (this one's came directly)."""
    return message.get("origin") != process_id()


def watchers(run_id: int) -> int:
    entry = REGISTRY.entry(run_id)
    return len(entry.subscribers) if entry is not None else 0


def anyone_watching() -> bool:
    """Whether a run may have a watcher: one in this process, or perhaps one in another
    (a channel layer that reaches other processes)."""
    return (remote_layer() is not None
            or any(entry.watched for entry in REGISTRY.entries()))


def remote_layer() -> Any:
    """The channel layer, when it reaches other processes; None for the in-memory one."""
    layer = get_channel_layer()
    return None if layer is None or isinstance(layer, InMemoryChannelLayer) else layer


def _send_out(layer: Any, run_id: int, message: dict[str, Any]) -> None:
    # One sender per run, so its events reach the other processes in order too.
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # a caller outside any loop (a command, a test): send it now
        _send_one(layer, run_id, message)
        return
    entry = REGISTRY.hold(run_id)
    queue, sender = entry.outgoing, entry.sender
    if queue is None or sender is None or sender.done() or sender.get_loop() is not loop:
        # None yet, or one of a loop that is gone (a command's, a test's): a fresh sender here.
        queue = entry.outgoing = asyncio.Queue()
        # The entry holds the sender task too, so it is not collected while it sends.
        entry.sender = loop.create_task(_drain(layer, run_id, queue))
    queue.put_nowait(message)


BATCH = "run.events"  # several events of one run in one group message, in order
MAX_BATCH = 200


def batched(events: list[dict[str, Any]]) -> dict[str, Any]:
    """One group message for the events waiting to go out: the event itself when alone.
    Under load a run's events queue up while one send is under way; one message for all of
    them costs the layer (Redis, msgpack) and every receiving process one trip, not many."""
    if len(events) == 1:
        return events[0]
    return {"type": BATCH, "events": events, "origin": events[0].get("origin")}


def unbatched(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The events of a group message (a batch, or a single event)."""
    return list(message["events"]) if message.get("type") == BATCH else [message]


async def _drain(layer: Any, run_id: int, queue: asyncio.Queue[dict[str, Any]]) -> None:
    try:
        while True:
            events = [await queue.get()]
            while not queue.empty() and len(events) < MAX_BATCH:
                events.append(queue.get_nowait())
            out_at = time.time()  # leaving for Redis (bench_live splits the latency here)
            for event in events:
                if event.get("type") == "run.step":
                    event["out_at"] = out_at
            await _send_safely(layer, run_id, batched(events))
            if queue.empty():  # sent out: the next event starts a new sender
                return
    finally:  # also when its loop ends and cancels it: the run's entry must not keep it
        entry = REGISTRY.entry(run_id)
        if entry is not None and entry.outgoing is queue:
            entry.outgoing = entry.sender = None
            REGISTRY.release(run_id)


async def _send_safely(layer: Any, run_id: int, message: dict[str, Any]) -> None:
    try:
        await layer.group_send(group_name(run_id), message)
    except Exception:  # a full or absent layer must never lose a recorded step
        log.exception("could not publish %s for run %s", message["type"], run_id)


def _send_one(layer: Any, run_id: int, message: dict[str, Any]) -> None:
    async_to_sync(_send_safely)(layer, run_id, message)
