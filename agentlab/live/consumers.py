"""The WebSocket consumer of one live run (the contract: docs/LIVE_PROTOCOL.md).

Thin by design: a handler reads or writes a row, forwards a control to `control.RunControl`,
or relays a group message. Runs are asyncio tasks owned by `agentlab.runs.execution`; nothing here
waits on one. Who may send what is `traces.access`'s policy, asked by the frame base
(`frames.LiveConsumer`) before the socket is accepted and again before every frame.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.db.models import QuerySet

from agentlab.live.frames import LiveConsumer
from agentlab.runs import control as run_control
from agentlab.runs import engine, execution, fanout, room
from agentlab.runs.fanout import group_name
from traces import access
from traces.display.renderer import StepRenderer
from traces.models import Run, Step
from traces.schema import FINISHED_STATUSES, HELD_STATUSES, RUN_TOTALS

OVERFLOW = 1013  # "try again later": the browser reconnects and re-syncs from the database
CONTROL_ACTIONS = ("pause", "resume", "step", "cancel", "edit", "approve", "deny")
# The group's messages: one event, or several of them in order (fanout.BATCH).
RUN_EVENTS = ("run.step", "run.token", "run.status", "run.approval", fanout.BATCH)
# Stamps a step frame carries for `manage.py bench_live`: handed to the recorder, committed,
# left the worker for Redis, heard by this process (the last two: scale profile only).
CLOCKS = ("recorded_at", "sent_at", "out_at", "heard_at")
# What each frame of the run socket needs (traces.access.RULES says who has it).
RUN_FRAMES: dict[str, access.Action] = {"sync": "watch", "start": "control",
                                        **run_control.PERMISSIONS}


class RunConsumer(LiveConsumer):
    """/ws/runs/<id>/: backfill from the database, then the run's live events: from the
    recorder of this process directly (agentlab.runs.fanout), from other processes through the
    channel layer's group when it reaches them."""

    frames = RUN_FRAMES
    joined = False

    def target(self) -> tuple[QuerySet[Any], int]:
        return Run.objects.all(), self.run_id

    async def connect(self) -> None:
        self.run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        self.synced = self.syncing = False
        self.settings: run_control.DebugSettings | None = None  # for a run not started yet
        self.backlog: list[dict[str, Any]] = []  # live events heard while the sync reads
        self.outbox: deque[dict[str, Any]] = deque()
        self.sender: asyncio.Task[None] | None = None
        await super().connect()

    async def join(self) -> None:
        fanout.subscribe(self.run_id, self.hear)
        self.joined = True
        if fanout.remote_layer() is not None:
            await self.channel_layer.group_add(group_name(self.run_id), self.channel_name)

    async def leave(self) -> None:
        self.synced = self.syncing = False  # hear() drops whatever still comes
        self.backlog.clear()
        self.outbox.clear()
        if not self.joined:
            return
        self.joined = False
        fanout.unsubscribe(self.run_id, self.hear)
        if fanout.remote_layer() is not None:
            await self.channel_layer.group_discard(group_name(self.run_id), self.channel_name)

    def hear(self, event: dict[str, Any]) -> None:
        """A live event of the run (a fanout subscriber: called by the recorder, must not
        block). Before a sync it is dropped (the sync reads it from the database: persist,
        then publish); while the sync reads, it waits; after, it is sent at once. A socket
        that falls too far behind is closed instead (`overflow`)."""
        if not self.synced:
            if self.syncing:
                self.backlog.append(event)
                if len(self.backlog) > outbox_limit():
                    self.overflow()
            return
        self.outbox.append(event)
        if len(self.outbox) > outbox_limit():
            return self.overflow()
        if self.sender is None or self.sender.done():
            # Eager: the frame is rendered and written in this turn of the loop, not the next.
            self.sender = asyncio.Task(self.send_outbox(), loop=asyncio.get_running_loop(),
                                       eager_start=True)

    def overflow(self) -> None:
        """Too many events wait for this socket (its reader is slow): drop them, stop
        listening and close with 1013; the browser reconnects and syncs the steps it lacks from
        the database, so nothing is lost and memory stays bounded."""
        asyncio.get_running_loop().create_task(self.close_behind())
        self.synced = self.syncing = False
        self.backlog.clear()
        self.outbox.clear()

    async def close_behind(self) -> None:
        self.admitted = False
        await self.leave()
        await self.close(code=OVERFLOW)

    async def send_outbox(self) -> None:
        while self.outbox:
            event = self.outbox.popleft()
            await getattr(self, event["type"].replace(".", "_"))(event)

    # ------------------------------------------------------------------ browser -> server

    async def do_sync(self, frame: dict[str, Any]) -> None:
        last = frame.get("last_seq", 0)
        if not isinstance(last, int) or isinstance(last, bool) or last < 0:
            raise run_control.ControlError('"last_seq" must be a whole number ≥ 0')
        # Live events that arrive while this reads the database wait in the backlog and come
        # after; anything published before a read is in it (persist, then publish).
        self.synced, self.syncing = False, True
        start, parents = await tree(self.run_id, last)
        self.renderer = StepRenderer(self.run_id, run_start=start, parents=parents)
        sent, page = last, backfill_page()
        while self.syncing:  # one page of steps at a time, never the whole run at once
            steps = await steps_after(self.run_id, sent, page)
            for step in steps:
                await self.send_json(self.renderer.frame(step))
            sent = steps[-1]["seq"] if steps else sent
            if len(steps) < page:
                break
        if not self.syncing:  # left (closed, refused, overflowed) while it read
            return
        await self.send_state(await run_state(self.run_id))
        self.synced, self.syncing = True, False
        await self.send_json({"type": "synced", "last_seq": sent})
        backlog, self.backlog = self.backlog, []
        for event in backlog:  # in order; a step already sent comes again as its update
            self.hear(event)

    async def send_state(self, run: dict[str, Any]) -> None:
        # Asked of this process's RunControl, or of the worker holding the run.
        held = await engine.state(self.run_id) if run["status"] in HELD_STATUSES else None
        detail = held["detail"] if held and run["status"] == "paused" else {}
        frame = {"type": "status", "status": run["status"], "detail": detail}
        if held:  # the run's step mode and breakpoints now, for the page's checkboxes
            frame["debug"] = held["debug"]
        await self.send_json(frame)
        for message in held["approvals"] if held else []:
            await self.send_json({"type": "approval", **_approval(message)})
        if run["status"] in FINISHED_STATUSES:
            await self.send_json(_final(run["status"], run["final_answer"], run["error"],
                                        run["totals"]))

    async def do_start(self, frame: dict[str, Any]) -> None:
        try:
            run = await execution.claim_queued(self.run_id)
        except room.RunLimit as exc:
            raise run_control.ControlError(str(exc)) from None
        if run is None:
            raise run_control.ControlError("the run has already started")
        await engine.submit(run, self.settings)  # here, or on a worker (runs/engine.py)

    async def do_debug(self, frame: dict[str, Any]) -> None:
        debug = run_control.DebugSettings.from_frame(frame)
        if run_control.get(self.run_id) is None and await execution.is_queued(self.run_id):
            self.settings = debug  # applied when this socket starts the run
        else:
            await engine.control(self.run_id, frame)

    async def forward(self, frame: dict[str, Any]) -> None:
        """To the run's RunControl: in this process, or on the worker that holds the run."""
        await engine.control(self.run_id, frame)

    do_pause = do_resume = do_step = do_cancel = do_edit = do_approve = do_deny = forward

    # ------------------------------------------------------------------ group -> browser

    async def dispatch(self, message: dict[str, Any]) -> None:
        # The run's group messages (from other processes) touch no database, so they skip
        # Channels' per-message close_old_connections(), a trip through the one
        # thread-sensitive executor thread every consumer in the process shares.
        if message["type"] in RUN_EVENTS:
            if fanout.from_elsewhere(message):  # this process's came directly
                heard_at = time.time()
                for event in fanout.unbatched(message):
                    if "out_at" in event:
                        event["heard_at"] = heard_at
                    self.hear(event)
        else:
            await super().dispatch(message)

    # The run's events, once synced (see `hear`).

    async def run_step(self, event: dict[str, Any]) -> None:
        # A seq already sent is re-sent as an update: the browser replaces it by seq.
        frame = self.renderer.live_frame(event)
        for clock in CLOCKS:  # for latency figures (bench_live)
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


def outbox_limit() -> int:
    return max(1, settings.AGENTLAB_SOCKET_OUTBOX)


def backfill_page() -> int:
    return max(1, settings.AGENTLAB_BACKFILL_PAGE)


def _final(status: str, answer: Any, error: Any, totals: dict[str, Any]) -> dict[str, Any]:
    return {"type": "final", "status": status, "answer": answer, "error": error,
            "totals": totals}


def _approval(event: dict[str, Any]) -> dict[str, Any]:
    return {"seq": event["seq"], "tool": event["tool"], "arguments": event["arguments"],
            "expires_at": event.get("expires_at")}


@database_sync_to_async
def tree(run_id: int, last_seq: int) -> tuple[Any, dict[int, int | None]]:
    """The run's start, and the parents of the steps up to `last_seq` that have one (what
    places the steps still to come in the tree; two small columns, not the steps)."""
    run = Run.objects.only("started_at", "created").get(pk=run_id)
    parents = dict(run.steps.filter(seq__lte=last_seq, parent__isnull=False)
                   .values_list("seq", "parent"))
    return run.started_at or run.created, parents


@database_sync_to_async
def steps_after(run_id: int, after: int, limit: int) -> list[dict[str, Any]]:
    """One page of backfill: at most `limit` steps with seq > `after`, in order."""
    rows = Step.objects.filter(run_id=run_id, seq__gt=after).order_by("seq")[:limit]
    return [s.to_record().to_dict() for s in rows]


@database_sync_to_async
def run_state(run_id: int) -> dict[str, Any]:
    """The run's status, answer, error and totals, read after its steps."""
    run = Run.objects.defer("agent_snapshot", "history", "input").get(pk=run_id)
    totals = {f: getattr(run, f) for f in RUN_TOTALS}
    return {"status": run.status, "final_answer": run.final_answer, "error": run.error,
            "totals": totals}
