"""The workers' engine (`AGENTLAB_RUNS_ON=workers`): what agentlab.runs.engine forwards to.

`submit` queues the run's procrastinate job (agentlab.workers.app); `control` and `state` ask
the worker holding the run over the channel layer (agentlab.workers.relay) and turn its answer,
or its silence, into what the browser is told.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings

from agentlab.runs import control as run_control
from agentlab.workers.app import defer_run
from agentlab.workers.relay import ask


class WorkerEngine:
    name = "workers"
    in_this_process = False

    async def submit(self, run: Any, settings_: run_control.DebugSettings | None = None) -> None:
        debug = settings_.to_dict() if settings_ is not None else {}
        await sync_to_async(defer_run, thread_sensitive=False)(run.pk, debug)

    async def control(self, run_id: int, frame: dict[str, Any]) -> None:
        reply = await ask(run_id, {"type": "run.control", "frame": frame})
        if reply is None:
            raise run_control.ControlError(
                f"no worker answered for this run within {settings.AGENTLAB_CONTROL_REPLY_S} s: "
                "it is not active, or its worker stopped and another takes it over within "
                f"{settings.AGENTLAB_TAKEOVER_S} s; try again then")
        if not reply.get("ok"):
            raise run_control.ControlError(str(reply.get("error") or "the run is not active"))

    async def state(self, run_id: int) -> dict[str, Any] | None:
        # A sync waits for this: a run between two workers (taken over) answers None soon.
        reply = await ask(run_id, {"type": "run.state"},
                          timeout=min(2.0, settings.AGENTLAB_CONTROL_REPLY_S))
        return reply.get("state") if reply and reply.get("ok") else None
