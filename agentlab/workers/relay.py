"""Controls and state requests for a run, from any web process to the worker that holds it.

A worker process listens on one channel of the channel layer (Redis in the scale profile) and
adds it to the control group of every run it holds (`control_group`). A web process sends a
control frame — already authorized there, per frame, by traces.access like any other — or a
state request to that group with its reply channel (one per process and loop) and a request
id, and waits for the answer at most AGENTLAB_CONTROL_REPLY_S: the worker follows the frame
on the run's RunControl and answers "done" or the ControlError's text, which the browser
shows as it is. The effect (paused, running, an approval decided) reaches every watching
browser as any step does: the worker records it, and fanout sends it to the run's watchers in
every process.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
import weakref
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings

from agentlab.runs import control as run_control
from agentlab.runs import engine

log = logging.getLogger(__name__)

NOT_HELD = "the run is not active"


def control_group(run_id: int) -> str:
    """The channel-layer group of whoever holds run `run_id` (one worker at a time)."""
    return f"run-control-{run_id}"


async def ask(run_id: int, message: dict[str, Any], timeout: float | None = None
              ) -> dict[str, Any] | None:
    """Send `message` to the holder of the run and wait for its reply; None when nobody
    answered in time (no worker holds the run now)."""
    layer = get_channel_layer()
    replies = await _replies(layer)
    request = uuid.uuid4().hex
    answered = asyncio.get_running_loop().create_future()
    replies.waiting[request] = answered
    try:
        await layer.group_send(control_group(run_id), {
            **message, "run_id": run_id, "reply_to": replies.channel, "request": request})
        wait = settings.AGENTLAB_CONTROL_REPLY_S if timeout is None else timeout
        return await asyncio.wait_for(answered, wait)
    except TimeoutError:
        return None
    finally:
        replies.waiting.pop(request, None)


class _Replies:
    """The channel this process's loop hears replies on, one for every `ask`: a channel per
    ask would stay subscribed on the pub/sub layer after its reply (channels has no way to
    drop one). A reply names its request."""

    def __init__(self, layer: Any, channel: str) -> None:
        self.layer, self.channel = layer, channel
        self.waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.task = asyncio.get_running_loop().create_task(self._serve(), name="control-replies")

    def serves(self, layer: Any) -> bool:
        return self.layer is layer and not self.task.done()

    async def _serve(self) -> None:
        while True:
            reply = await self.layer.receive(self.channel)
            answered = self.waiting.pop(str(reply.get("request")), None)
            if answered is not None and not answered.done():
                answered.set_result(reply)


_REPLIES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Replies] = \
    weakref.WeakKeyDictionary()


async def _replies(layer: Any) -> _Replies:
    loop = asyncio.get_running_loop()
    if (replies := _REPLIES.get(loop)) is None or not replies.serves(layer):
        channel = await layer.new_channel()
        # Another ask may have made one while this one waited for its channel.
        if (replies := _REPLIES.get(loop)) is None or not replies.serves(layer):
            replies = _REPLIES[loop] = _Replies(layer, channel)
    return replies


class Relay:
    """A worker's end: the control groups of the runs it holds, and the answers."""

    def __init__(self) -> None:
        self.layer = get_channel_layer()
        self.channel = ""
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> Relay:
        self.channel = await self.layer.new_channel()
        self._task = asyncio.get_running_loop().create_task(self._serve(), name="relay")
        return self

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def hold(self, run_id: int) -> None:
        await self.layer.group_add(control_group(run_id), self.channel)

    async def release(self, run_id: int) -> None:
        await self.layer.group_discard(control_group(run_id), self.channel)

    async def _serve(self) -> None:
        while True:
            message = await self.layer.receive(self.channel)
            try:  # one at a time: controls of a run are followed in the order they came
                await self._answer(message)
            except Exception:  # a malformed message must not stop the relay
                log.exception("a control message could not be answered: %r", message)

    async def _answer(self, message: dict[str, Any]) -> None:
        run_id, reply_to = message.get("run_id"), message.get("reply_to")
        if not isinstance(run_id, int) or not isinstance(reply_to, str):
            return
        control = run_control.get(run_id)
        reply: dict[str, Any] = {"type": "run.reply", "ok": False, "error": NOT_HELD}
        if control is not None and message.get("type") == "run.control":
            try:
                await control.act(message["frame"])
                reply = {"type": "run.reply", "ok": True}
            except run_control.ControlError as exc:
                reply["error"] = str(exc)
        elif control is not None and message.get("type") == "run.state":
            reply = {"type": "run.reply", "ok": True, "state": engine.local_state(control)}
        await self.layer.send(reply_to, {**reply, "request": message.get("request")})


RELAY: list[Relay] = []  # this worker process's relay, once started (agentlab.workers.job)
