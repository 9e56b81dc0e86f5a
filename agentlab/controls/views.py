"""`/runs/<id>/control`: the run socket's controls over plain HTTP, for scripts and terminals
(the launcher, curl, a test) — the same frames (docs/LIVE_PROTOCOL.md), the same checks:
a logged-in user (session and CSRF token, like any form), the same permission per action as
the socket asks (traces.access), the same limit on a frame's size. GET says where the run
stands (watch); POST sends one control frame."""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import Http404, HttpRequest, JsonResponse

from agentlab.runs import engine
from agentlab.runs.control import PERMISSIONS, ControlError
from traces import access
from traces.models import Run

ACTIONS: dict[str, access.Action] = PERMISSIONS  # type: ignore[assignment]


async def run_control(request: HttpRequest, pk: int) -> JsonResponse:
    user = await request.auser()
    if request.method == "GET":
        await _require(user, "watch", pk)
        return JsonResponse(await _state(pk))
    if request.method != "POST":
        return JsonResponse({"error": "GET the state, or POST a control frame."}, status=405)
    if len(request.body) > settings.AGENTLAB_MAX_FRAME_CHARS:
        return JsonResponse({"error": f"a frame may have at most "
                                      f"{settings.AGENTLAB_MAX_FRAME_CHARS:,} characters"},
                            status=413)
    try:
        frame = json.loads(request.body)
    except (ValueError, RecursionError):
        return JsonResponse({"error": "the frame is not valid JSON"}, status=400)
    action = frame.get("action") if isinstance(frame, dict) else None
    if not isinstance(action, str) or action not in ACTIONS:
        return JsonResponse({"error": f"unknown action {action!r} (known: "
                                      f"{', '.join(ACTIONS)})"}, status=400)
    await _require(user, ACTIONS[action], pk)
    try:
        await engine.control(pk, frame)
    except ControlError as exc:
        return JsonResponse({"error": str(exc)}, status=409)
    return JsonResponse(await _state(pk))


async def _require(user: Any, action: access.Action, pk: int) -> None:
    if not await sync_to_async(access.may_act)(user, action, pk):
        raise Http404(f"no run {pk}")  # another user's run reads like none


async def _state(pk: int) -> dict[str, Any]:
    status = await Run.objects.filter(pk=pk).values_list("status", flat=True).afirst()
    held = await engine.state(pk)
    return {"run": pk, "status": status, "detail": held["detail"] if held else {},
            "debug": held["debug"] if held else None}
