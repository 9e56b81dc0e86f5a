"""What `manage.py attach` asks of the server: open a session (record, replay or fork), say
its program ended, and — as a runner (`attach --serve`) — take the replays and forks asked for
from run pages. A token of scope `gateway` on each; a user reaches only their own sessions and
runs (another user's reads exactly like one that does not exist)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from agentlab.gateway.answer import json_response
from agentlab.gateway.models import GatewayRunner, GatewaySession, SessionLimit, ensure_session_room
from agentlab.gateway.protocol import GatewayError
from agentlab.gateway.sessions import end_session, own_session
from agentlab.gateway.views import _allow, gateway_view, read_json
from agentlab.runs.control import ControlError, DebugSettings
from traces.models import Run

MAX_WAIT_S = 30  # a runner's long poll
POLL_S = 0.5
NAME_CHARS = 200
MAX_INT = 2**31 - 1  # an integer column's largest value (PostgreSQL)


def _whole(value: Any, low: int, high: int) -> bool:
    """A whole number a database column holds (a bigger one would be a 500, not a 400)."""
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def base_url(request: HttpRequest, key: str) -> str:
    return request.build_absolute_uri(f"/gateway/s/{key}/v1")


def described(request: HttpRequest, row: GatewaySession) -> dict[str, Any]:
    return {"session": row.key, "base_url": base_url(request, row.key), "mode": row.mode,
            "name": row.name, "question": row.question, "source": row.source_id,
            "fork_seq": row.fork_seq, "on_divergence": row.on_divergence, "debug": row.debug,
            "run": row.run_id,
            "run_url": request.build_absolute_uri(f"/runs/{row.run_id}/") if row.run_id else None,
            "ended": row.ended_at is not None}


async def checked_session(user: Any, body: Any) -> dict[str, Any]:
    """The fields of a new session from a launcher's (or a page's) request, checked."""
    if not isinstance(body, dict):
        raise GatewayError(400, "Send a JSON object.")
    mode = body.get("mode", "record")
    if mode not in ("record", "replay", "fork"):
        raise GatewayError(400, "'mode' is record, replay or fork.", param="mode")
    fields: dict[str, Any] = {"mode": mode, "name": str(body.get("name") or "")[:NAME_CHARS],
                              "question": str(body.get("question") or "")}
    on = body.get("on_divergence", "live")
    if on not in ("live", "stop"):
        raise GatewayError(400, "'on_divergence' is live or stop.", param="on_divergence")
    fields["on_divergence"] = on
    debug = body.get("debug") or {}
    try:
        fields["debug"] = DebugSettings.from_frame(debug).to_dict() if debug else {}
    except (ControlError, AttributeError) as exc:
        raise GatewayError(400, f"'debug': {exc}", param="debug") from None
    if mode == "record":
        return fields
    source = body.get("source")
    if not isinstance(source, int) or isinstance(source, bool) or not await Run.objects.filter(
            pk=source, user=user).aexists():
        raise GatewayError(404, f"No run {source} of yours to {mode}.", param="source")
    fields["source_id"] = source
    if mode == "fork":
        at, edit = body.get("fork_seq"), body.get("edit") or {}
        if not _whole(at, 1, MAX_INT):
            raise GatewayError(400, "A fork needs 'fork_seq', the step it edits.",
                               param="fork_seq")
        if not isinstance(edit, dict) or not set(edit) <= {"response", "observation"}:
            raise GatewayError(400, "'edit' is {\"observation\": \"…\"} (a tool result) or "
                                    "{\"response\": {\"text\": \"…\"}} (a reply).", param="edit")
        fields |= {"fork_seq": at, "edit": edit}
    return fields


@gateway_view
async def open_session(request: HttpRequest, user: Any) -> HttpResponse:
    _allow(request, "POST")
    fields = await checked_session(user, await read_json(request))
    try:
        await sync_to_async(ensure_session_room, thread_sensitive=False)(user)
    except SessionLimit as exc:
        raise GatewayError(429, str(exc), type="rate_limit_error", code="too_many_sessions",
                           retry=False) from None
    row = await GatewaySession.objects.acreate(user=user, **fields)
    return json_response(described(request, row), 201)


@gateway_view
async def session_state(request: HttpRequest, user: Any, key: str) -> HttpResponse:
    _allow(request, "GET")
    return json_response(await _state(request, await own_session(user, key)))


async def _state(request: HttpRequest, row: GatewaySession) -> dict[str, Any]:
    state = described(request, row)
    if row.run_id is not None:
        run = await Run.objects.only("status", "agent_snapshot").aget(pk=row.run_id)
        state |= {"status": run.status,
                  "first_divergence": (run.agent_snapshot or {}).get("first_divergence")}
    return state


@gateway_view
async def end(request: HttpRequest, user: Any, key: str) -> HttpResponse:
    _allow(request, "POST")
    row = await own_session(user, key)
    body = await read_json(request) if request.body else {}
    code = body.get("exit_code") if isinstance(body, dict) else None
    if code is not None and not _whole(code, -MAX_INT - 1, MAX_INT):
        raise GatewayError(400, "'exit_code' must be a whole number (a process's exit "
                                "status).", param="exit_code")
    if row.ended_at is None:
        await end_session(row, code)
    return json_response(await _state(request, await own_session(user, key)))


@gateway_view
async def next_job(request: HttpRequest, user: Any) -> HttpResponse:
    """A runner's long poll: the oldest replay or fork asked for from a page, taken by this
    runner only (204 after `wait` seconds without one)."""
    _allow(request, "GET")
    try:
        wait = min(MAX_WAIT_S, max(0.0, float(request.GET.get("wait", MAX_WAIT_S))))
    except ValueError:
        raise GatewayError(400, "'wait' is a number of seconds.", param="wait") from None
    deadline = time.monotonic() + wait
    # A run page tells the person whether a runner of theirs is listening (runner_pages).
    await GatewayRunner.objects.aupdate_or_create(user=user,
                                                  defaults={"polled_at": timezone.now()})
    while True:
        waiting = GatewaySession.objects.filter(user=user, for_runner=True,
                                                taken_at__isnull=True).order_by("pk")
        async for row in waiting[:5]:
            if await GatewaySession.objects.filter(pk=row.pk, taken_at__isnull=True).aupdate(
                    taken_at=timezone.now()):
                return json_response(described(request, row))
        if time.monotonic() >= deadline:
            return HttpResponse(status=204)
        await asyncio.sleep(POLL_S)
