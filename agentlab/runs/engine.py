"""Where runs execute, behind one interface: this process (the default) or the workers of a
task queue (agentlab.workers, `AGENTLAB_RUNS_ON=workers`).

Every page and socket that starts a run calls `submit`, and every control or state request for
a run this process does not hold goes through `control` / `state`; which engine answers is
named by one dotted-path setting, `AGENTLAB_RUN_ENGINE` (from `AGENTLAB_RUNS_ON`), the way
Channels names its layer. So the embedded profile and the scale profile share one code path
above this module:

- `InProcess`: the run is an asyncio task of this process's loop (agentlab.runs.control.start);
  a run this process does not hold has no one to reach.
- `agentlab.workers.engine.WorkerEngine`: the run is a procrastinate job executed by a worker
  process; controls and state requests travel over the channel layer to whichever worker holds
  the run, and its answer (or refusal) comes back.

Wherever a run executes, it is prepared from its rows alone (`start_here`): a replay, fork or
resume rebuilds the record it follows from the database (the `prepare_run` hook, traces/hooks.py:
agentlab.forks.record.prepare_for), so the same run executes the same way in this process and
on a worker, and nothing but the run's id crosses between them.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any, Protocol

from asgiref.sync import sync_to_async
from django.conf import settings

from agentlab.runs import control as run_control
from agentlab.runs.recorder import Recorder
from traces.hooks import hook, load

Prepare = Callable[[Any], None]  # rewires a run's built RunContext (runs.execution.execute_run)
Planner = Callable[[Any], Prepare | None]  # a run -> how it is prepared (None: as it is)


class RunEngine(Protocol):
    name: str
    in_this_process: bool  # whether submitted runs execute as tasks of this process's loop

    async def submit(self, run: Any, settings: run_control.DebugSettings | None = None) -> None:
        """Have `run` (a claimed, queued traces Run) executed from now on."""

    async def control(self, run_id: int, frame: dict[str, Any]) -> None:
        """Follow a control frame for a run held elsewhere; ControlError when it cannot."""

    async def state(self, run_id: int) -> dict[str, Any] | None:
        """A run held elsewhere: its debug detail, settings and pending approvals; None when
        nobody holds it."""


class InProcess:
    """Runs are tasks of this process's loop; nothing is held elsewhere."""

    name = "this process"
    in_this_process = True

    async def submit(self, run: Any, settings: run_control.DebugSettings | None = None) -> None:
        await start_here(run, settings)

    async def control(self, run_id: int, frame: dict[str, Any]) -> None:
        raise run_control.ControlError("the run is not active")

    async def state(self, run_id: int) -> dict[str, Any] | None:
        return None


async def start_here(run: Any, settings: run_control.DebugSettings | None = None, *,
                     prepare: Prepare | None = None) -> run_control.RunControl | None:
    """Execute `run` (a claimed traces Run) in this process from now on: InProcess.submit, a
    worker's job. Unless `prepare` is given (a takeover's), the installed planner prepares it
    from the database; a run it cannot prepare (a fork whose source was deleted since) ends
    failed with the reason, recorded and announced like any ending, and None is returned."""
    planner: Planner | None = hook("prepare_run")
    if prepare is None and planner is not None:
        try:
            prepare = await sync_to_async(planner, thread_sensitive=False)(run)
        except ValueError as exc:
            await Recorder(run.pk).status("failed", {"error": str(exc)})
            return None
    return run_control.start(run, settings, prepare=prepare)


def current() -> RunEngine:
    """The engine `settings.AGENTLAB_RUN_ENGINE` names (one instance per class and process)."""
    return _instance(settings.AGENTLAB_RUN_ENGINE)


@cache
def _instance(path: str) -> RunEngine:
    return load(path)()


async def submit(run: Any, settings: run_control.DebugSettings | None = None) -> None:
    await current().submit(run, settings)


async def control(run_id: int, frame: dict[str, Any]) -> None:
    """A control frame: to the run's RunControl when this process holds it, else to the
    engine (the worker holding it)."""
    if (held := run_control.get(run_id)) is not None:
        await held.act(frame)
    else:
        await current().control(run_id, frame)


def local_state(control: run_control.RunControl) -> dict[str, Any]:
    """What a socket shows of a held run besides its status: the pause detail, the debug
    settings and the calls waiting for approve or deny (also what a worker answers)."""
    return {"detail": control.detail(), "debug": control.settings.to_dict(),
            "approvals": control.approval_messages()}


async def state(run_id: int) -> dict[str, Any] | None:
    if (held := run_control.get(run_id)) is not None:
        return local_state(held)
    return await current().state(run_id)
