"""The socket half every live consumer shares: JSON frames in and out, and who may send
them (the contract: docs/LIVE_PROTOCOL.md).

A socket is admitted, or not, before it is accepted; every frame is size-checked, parsed, and
its action authorised afresh against the database (`traces.access`) before its handler runs.
"""

from __future__ import annotations

import json
from importlib import import_module
from types import SimpleNamespace
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.contrib import auth
from django.contrib.auth.models import AnonymousUser
from django.db.models import QuerySet

from agentlab.runs.control import ControlError
from traces import access

REFUSED = 4403  # anonymous, another user's, or missing: all look the same
CLIP = 300  # characters of a bad frame echoed back


class LiveConsumer(AsyncWebsocketConsumer):
    """JSON frames in and out. The socket is admitted (or not) before it is accepted: a refused
    one is accepted only to be closed with 4403, joins nothing and acts on nothing it sends.
    Every frame is size-checked, parsed, and its action authorised afresh against the database
    before its handler runs; a bad frame gets an error frame and the socket stays open."""

    frames: dict[str, access.Action] = {}  # action -> the permission it needs
    admission: access.Action = "watch"  # what a socket needs to be accepted at all
    admitted = False

    def target(self) -> tuple[QuerySet[Any], int]:
        """The rows and the id whose owner decides (the run, the conversation)."""
        raise NotImplementedError

    async def connect(self) -> None:
        admitted = await self.authorized(self.admission)  # decided before anything is joined
        await self.accept()  # then close with a code the browser sees (no blind reconnects)
        if not admitted:
            return await self.refuse()
        self.admitted = True
        await self.join()

    async def join(self) -> None:
        """Start listening (an admitted socket only)."""

    async def leave(self) -> None:
        """Stop listening; safe to call twice."""

    async def disconnect(self, code: int) -> None:
        self.admitted = False
        await self.leave()  # the run goes on without its watcher

    async def refuse(self) -> None:
        self.admitted = False
        await self.leave()
        await self.send_json({"type": "error", "error": "not found, or not yours to watch"})
        await self.close(code=REFUSED)

    async def authorized(self, action: access.Action) -> bool:
        rows, pk = self.target()
        return await authorized(self.scope, action, rows, pk)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if not self.admitted:  # refused (or refused since): nothing it sends is read
            return
        limit = settings.AGENTLAB_MAX_FRAME_CHARS
        size = len(text_data) if text_data is not None else len(bytes_data or b"")
        if size > limit:
            head = text_data[:CLIP] if text_data is not None else repr((bytes_data or b"")[:CLIP])
            return await self.error(f"the frame is {size:,} characters; a frame may have at "
                                    f"most {limit:,}", head)
        raw = text_data if text_data is not None else (bytes_data or b"").decode("utf-8", "replace")
        try:
            frame = json.loads(raw)
        except ValueError:
            return await self.error("the frame is not valid JSON", raw)
        except RecursionError:  # "[[[[…": Python's parser gives up near 1,000 levels
            return await self.error("the frame is nested too deep", raw)
        if not isinstance(frame, dict):
            return await self.error("the frame must be a JSON object", frame)
        action = frame.get("action")
        if not isinstance(action, str) or action not in self.frames:  # [] is not hashable
            known = ", ".join(self.frames)
            return await self.error(f"unknown action {action!r} (known: {known})", frame)
        if not await self.authorized(self.frames[action]):
            return await self.refused(action, frame)
        try:
            await getattr(self, f"do_{action}")(frame)
        except ControlError as exc:
            await self.error(str(exc), frame)

    async def refused(self, action: str, frame: dict[str, Any]) -> None:
        # Rights can change while a socket is open (logged out, deactivated, no longer staff,
        # the row given to someone else): who may no longer watch is refused altogether.
        if self.frames[action] != self.admission and await self.authorized(self.admission):
            return await self.error(f"you may not {action} here", frame)
        await self.refuse()

    async def error(self, message: str, frame: Any) -> None:
        try:
            text = frame if isinstance(frame, str) else json.dumps(frame, default=str)
        except RecursionError:  # nested nearly as deep as the parser goes
            text = "(nested too deep to echo)"
        await self.send_json({"type": "error", "error": message, "frame": text[:CLIP]})

    async def send_json(self, content: dict[str, Any]) -> None:
        await self.send(text_data=json.dumps(content, default=str))


def logged_in_user(scope: dict[str, Any]) -> Any:
    """Who the socket's session is logged in as now, read again as an HTTP request would read
    it: a session logged out, a user deleted or deactivated, or a password changed since the
    socket connected make it anonymous; so does a session now of another user."""
    session, user = scope.get("session"), scope.get("user")
    key = getattr(session, "session_key", None)
    if not key or user is None or not user.is_authenticated:
        return AnonymousUser()
    store = import_module(settings.SESSION_ENGINE).SessionStore(key)
    now = auth.get_user(SimpleNamespace(session=store))  # type: ignore[arg-type]
    return now if now.is_authenticated and now.pk == user.pk else AnonymousUser()


@database_sync_to_async
def authorized(scope: dict[str, Any], action: access.Action, rows: QuerySet[Any],
               pk: int) -> bool:
    return access.may(logged_in_user(scope), action, rows, pk)
