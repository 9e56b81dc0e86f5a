"""The WebSocket consumer of one live run, and the JSON-frame base the chat's consumer shares
(the contract: docs/LIVE_PROTOCOL.md).

Thin by design: a handler reads or writes a row, forwards a control to `control.RunControl`,
or relays a group message. Runs are asyncio tasks owned by `agentlab.runs.tasks`; nothing here
waits on one.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from agentlab.live import control as live
from agentlab.runs import tasks
from traces import access, fanout
from traces.display.renderer import StepRenderer
from traces.fanout import group_name
from traces.models import Run
from traces.schema import FINISHED_STATUSES

REFUSED = 4403  # anonymous, another user's, or missing: all look the same
CONTROL_ACTIONS = ("pause", "resume", "step", "cancel", "edit", "approve", "deny")
CLIP = 300  # characters of a bad frame echoed back
RUN_EVENTS = ("run.step", "run.token", "run.status", "run.approval")  # the group's messages


class LiveConsumer(AsyncWebsocketConsumer):
    """JSON frames in and out; bad frames get an error frame and the socket stays open."""

    actions: tuple[str, ...] = ()

    async def refuse(self) -> None:
        await self.send_json({"type": "error", "error": "not found, or not yours to watch"})
        await self.close(code=REFUSED)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        raw = text_data if text_data is not None else (bytes_data or b"").decode("utf-8", "replace")
        try:
            frame = json.loads(raw)
        except ValueError:
            return await self.error("the frame is not valid JSON", raw)
        if not isinstance(frame, dict):
            return await self.error("the frame must be a JSON object", frame)
        action = frame.get("action")
        if action not in self.actions:
            known = ", ".join(self.actions)
            return await self.error(f"unknown action {action!r} (known: {known})", frame)
        try:
            await getattr(self, f"do_{action}")(frame)
        except live.ControlError as exc:
            await self.error(str(exc), frame)

    async def error(self, message: str, frame: Any) -> None:
        text = frame if isinstance(frame, str) else json.dumps(frame, default=str)
        await self.send_json({"type": "error", "error": message, "frame": text[:CLIP]})

    async def send_json(self, content: dict[str, Any]) -> None:
        await self.send(text_data=json.dumps(content, default=str))


class RunConsumer(LiveConsumer):
    """/ws/runs/<id>/: backfill from the database, then the run's live events: from the
    recorder of this process directly (traces.fanout), from other processes through the
    channel layer's group when it reaches them."""

    actions = ("sync", "start", "debug", *CONTROL_ACTIONS)

    async def connect(self) -> None:
        self.run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        self.synced = self.syncing = False
        self.settings: live.DebugSettings | None = None  # for a run not started yet
        self.backlog: list[dict[str, Any]] = []  # live events heard while the sync reads
        self.outbox: deque[dict[str, Any]] = deque()
        self.sender: asyncio.Task[None] | None = None
        await self.accept()  # then close with a code the browser sees (no blind reconnects)
        self.joined = False
        if not await can_see_run(self.scope["user"], self.run_id):
            return await self.refuse()
        fanout.subscribe(self.run_id, self.hear)
        if fanout.remote_layer() is not None:
            await self.channel_layer.group_add(group_name(self.run_id), self.channel_name)
        self.joined = True

    async def disconnect(self, code: int) -> None:
        # The run goes on without its watcher.
        if getattr(self, "joined", False):
            fanout.unsubscribe(self.run_id, self.hear)
            if fanout.remote_layer() is not None:
                await self.channel_layer.group_discard(group_name(self.run_id),
                                                       self.channel_name)

    def hear(self, event: dict[str, Any]) -> None:
        """A live event of the run (a fanout subscriber: called by the recorder, must not
        block). Before a sync it is dropped (the sync reads it from the database: persist,
        then publish); while the sync reads, it waits; after, it is sent at once."""
        if not self.synced:
            if self.syncing:
                self.backlog.append(event)
            return
        self.outbox.append(event)
        if self.sender is None or self.sender.done():
            # Eager: the frame is rendered and written in this turn of the loop, not the next.
            self.sender = asyncio.Task(self.send_outbox(), loop=asyncio.get_running_loop(),
                                       eager_start=True)

    async def send_outbox(self) -> None:
        while self.outbox:
            event = self.outbox.popleft()
            await getattr(self, event["type"].replace(".", "_"))(event)

    # ------------------------------------------------------------------ browser -> server

    async def do_sync(self, frame: dict[str, Any]) -> None:
        last = frame.get("last_seq", 0)
        if not isinstance(last, int) or isinstance(last, bool) or last < 0:
            raise live.ControlError('"last_seq" must be a whole number ≥ 0')
        # Live events that arrive while this reads the database wait in the backlog and come
        # after; anything published before the read is in it (persist, then publish).
        self.syncing = True
        steps, run = await backfill(self.run_id, last)
        self.renderer = StepRenderer(self.run_id, run_start=run["start"], parents=run["parents"])
        for step in steps:
            await self.send_json(self.renderer.frame(step))
        await self.send_state(run)
        self.synced, self.syncing = True, False
        await self.send_json({"type": "synced",
                              "last_seq": max([last, *(s["seq"] for s in steps)])})
        backlog, self.backlog = self.backlog, []
        for event in backlog:  # in order; a step already sent comes again as its update
            self.hear(event)

    async def send_state(self, run: dict[str, Any]) -> None:
        control = live.get(self.run_id)
        detail = control.detail() if control and run["status"] == "paused" else {}
        await self.send_json({"type": "status", "status": run["status"], "detail": detail})
        for step in control.approvals() if control else []:
            await self.send_json({"type": "approval", **_approval(live.approval_message(step))})
        if run["status"] in FINISHED_STATUSES:
            await self.send_json(_final(run["status"], run["final_answer"], run["error"],
                                        run["totals"]))

    async def do_start(self, frame: dict[str, Any]) -> None:
        run = await tasks.claim_queued(self.run_id)
        if run is None:
            raise live.ControlError("the run has already started")
        live.start(run, self.settings)

    async def do_debug(self, frame: dict[str, Any]) -> None:
        settings = live.DebugSettings.from_frame(frame)
        if control := live.get(self.run_id):
            await control.act(frame)
        elif await tasks.is_queued(self.run_id):
            self.settings = settings  # applied when this socket starts the run
        else:
            raise live.ControlError("the run is not active")

    async def forward(self, frame: dict[str, Any]) -> None:
        control = live.get(self.run_id)
        if control is None:
            raise live.ControlError("the run is not active")
        await control.act(frame)

    do_pause = do_resume = do_step = do_cancel = do_edit = do_approve = do_deny = forward

    # ------------------------------------------------------------------ group -> browser

    async def dispatch(self, message: dict[str, Any]) -> None:
        # The run's group messages (from other processes) touch no database, so they skip
        # Channels' per-message close_old_connections(), a trip through the one
        # thread-sensitive executor thread every consumer in the process shares.
        if message["type"] in RUN_EVENTS:
            if fanout.from_elsewhere(message):  # this process's came directly
                self.hear(message)
        else:
            await super().dispatch(message)

    # The run's events, once synced (see `hear`).

    async def run_step(self, event: dict[str, Any]) -> None:
        # A seq already sent is re-sent as an update: the browser replaces it by seq.
        frame = self.renderer.live_frame(event)
        for clock in ("recorded_at", "sent_at"):  # for latency figures (bench_live)
            if clock in event:
                frame[clock] = event[clock]
        await self.send_json(frame)

    async def run_token(self, event: dict[str, Any]) -> None:
        await self.send_json({"type": "token", "seq": event["seq"], "delta": event["delta"]})

    async def run_status(self, event: dict[str, Any]) -> None:
        status, detail = event["status"], event.get("detail") or {}
        await self.send_json({"type": "status", "status": status, "detail": detail})
        if status in FINISHED_STATUSES:
            await self.send_json(_final(status, detail.get("answer"), detail.get("error"),
                                        detail.get("totals", {})))

    async def run_approval(self, event: dict[str, Any]) -> None:
        await self.send_json({"type": "approval", **_approval(event)})


def _final(status: str, answer: Any, error: Any, totals: dict[str, Any]) -> dict[str, Any]:
    return {"type": "final", "status": status, "answer": answer, "error": error,
            "totals": totals}


def _approval(event: dict[str, Any]) -> dict[str, Any]:
    return {"seq": event["seq"], "tool": event["tool"], "arguments": event["arguments"]}


can_see_run = database_sync_to_async(access.can_see_run)


@database_sync_to_async
def backfill(run_id: int, last_seq: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Steps after `last_seq` in order, and the run's status, answer, error and totals."""
    run = Run.objects.get(pk=run_id)
    steps = [s.to_record().to_dict() for s in run.steps.filter(seq__gt=last_seq).order_by("seq")]
    totals = {f: getattr(run, f) for f in ("llm_calls", "tool_calls", "tokens_in", "tokens_out",
                                           "cost_usd", "wall_ms")}
    parents = dict(run.steps.values_list("seq", "parent"))
    return steps, {"status": run.status, "final_answer": run.final_answer, "error": run.error,
                   "totals": totals, "parents": parents, "start": run.started_at or run.created}
