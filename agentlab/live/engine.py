"""Where runs execute, behind one interface: this process (the default) or the workers of a
task engine (agentlab.workers, `AGENTLAB_RUNS_ON=workers`).

Every page and socket that starts a run calls `submit`, and every control or state request for
a run this process does not hold goes through `control` / `state`; which engine answers is
decided once, at start-up (`agentlab.apps` installs the workers' engine with `use`). So the
embedded profile and the scale profile share one code path above this module:

- `InProcess`: the run is an asyncio task of this process's loop (agentlab.live.control.start);
  a run this process does not hold has no one to reach.
- `agentlab.workers.engine.WorkerEngine`: the run is a procrastinate job executed by a worker
  process; controls and state requests travel over the channel layer to whichever worker holds
  the run, and its answer (or refusal) comes back.
"""

from __future__ import annotations

from typing import Any, Protocol

from agentlab.live import control as live


class RunEngine(Protocol):
    name: str

    async def submit(self, run: Any, settings: live.DebugSettings | None = None) -> None:
        """Have `run` (a claimed, queued traces Run) executed from now on."""

    async def control(self, run_id: int, frame: dict[str, Any]) -> None:
        """Follow a control frame for a run held elsewhere; ControlError when it cannot."""

    async def state(self, run_id: int) -> dict[str, Any] | None:
        """A run held elsewhere: its debug detail, settings and pending approvals; None when
        nobody holds it."""


class InProcess:
    """Runs are tasks of this process's loop; nothing is held elsewhere."""

    name = "this process"

    async def submit(self, run: Any, settings: live.DebugSettings | None = None) -> None:
        live.start(run, settings)

    async def control(self, run_id: int, frame: dict[str, Any]) -> None:
        raise live.ControlError("the run is not active")

    async def state(self, run_id: int) -> dict[str, Any] | None:
        return None


_ENGINE: list[RunEngine] = [InProcess()]


def current() -> RunEngine:
    return _ENGINE[0]


def use(engine: RunEngine) -> None:
    """Install the engine every later `submit` / `control` / `state` goes to."""
    _ENGINE[0] = engine


async def submit(run: Any, settings: live.DebugSettings | None = None) -> None:
    await current().submit(run, settings)


async def control(run_id: int, frame: dict[str, Any]) -> None:
    """A control frame: to the run's RunControl when this process holds it, else to the
    engine (the worker holding it)."""
    if (held := live.get(run_id)) is not None:
        await held.act(frame)
    else:
        await current().control(run_id, frame)


def local_state(control: live.RunControl) -> dict[str, Any]:
    """What a socket shows of a held run besides its status: the pause detail, the debug
    settings and the calls waiting for approve or deny (also what a worker answers)."""
    return {"detail": control.detail(), "debug": control.settings.to_dict(),
            "approvals": control.approval_messages()}


async def state(run_id: int) -> dict[str, Any] | None:
    if (held := live.get(run_id)) is not None:
        return local_state(held)
    return await current().state(run_id)
