"""A run's live events, handed straight to the sockets of this process that watch it.

Why not the channel layer for these: a group message reaches a consumer through a queue, a
receive task and the consumer's dispatch, each one more turn of the event loop; with twenty
busy runs a turn is tens of milliseconds, and a step waited through several of them
(`manage.py bench_live`). Here the recorder calls each watcher once the step's row is written,
in the same turn. The channel layer still carries the events to other processes when it is one
that can (Redis); the in-memory layer cannot, so it is not used for them.

A subscriber is a plain callable that must not block: a consumer queues or sends a frame.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer

log = logging.getLogger(__name__)

Subscriber = Callable[[dict[str, Any]], None]

_SUBSCRIBERS: dict[int, list[Subscriber]] = {}


def subscribe(run_id: int, subscriber: Subscriber) -> None:
    _SUBSCRIBERS.setdefault(run_id, []).append(subscriber)


def unsubscribe(run_id: int, subscriber: Subscriber) -> None:
    subscribers = _SUBSCRIBERS.get(run_id, [])
    if subscriber in subscribers:
        subscribers.remove(subscriber)
    if not subscribers:
        _SUBSCRIBERS.pop(run_id, None)


def publish(run_id: int, message: dict[str, Any]) -> None:
    """Give `message` to every watcher of the run in this process, now, in subscription order."""
    for subscriber in list(_SUBSCRIBERS.get(run_id, ())):
        try:
            subscriber(message)
        except Exception:  # one broken socket must not keep the others from the step
            log.exception("a watcher of run %s failed on %s", run_id, message.get("type"))


def watchers(run_id: int) -> int:
    return len(_SUBSCRIBERS.get(run_id, ()))


def remote_layer() -> Any:
    """The channel layer, when it reaches other processes; None for the in-memory one."""
    layer = get_channel_layer()
    return None if layer is None or isinstance(layer, InMemoryChannelLayer) else layer
