"""Live control of the runs this process executes: pause, resume, step, breakpoints, pending
edits and approvals (README "Step-by-step debugging").

A `RunControl` is three things to one run: its `checkpoint` and `approver` hooks (handed to
`execution.launch`), a watcher sink (it sees every recorded step, for breakpoints "after" a step),
and the target of the controls a WebSocket consumer forwards. Waiting is an asyncio future per
pause, so the run's task sleeps and the socket stays free; cancel reaches the task through
`execution.cancel`. A run's control is part of its entry in this process's run registry
(agentlab/runs/registry.py), until its task is done.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from django.conf import settings

from agentlab.runs import execution
from agentlab.runs.recorder import Recorder
from agentlab.runs.registry import REGISTRY
from agentlab.runtime.context import Approval
from traces.schema import Step

# What each control needs (traces.access.RULES says who has it): the run socket's frames and
# the same controls over HTTP (agentlab/controls/) ask the same.
PERMISSIONS: dict[str, str] = {
    **dict.fromkeys(("pause", "resume", "step", "cancel", "edit", "debug"), "control"),
    "approve": "approve", "deny": "approve",
}
BREAK_KINDS = ("llm", "tool")  # the kinds of call a checkpoint comes before
LLM_REQUEST_KEYS = ("messages", "tools", "tool_choice", "response_format", "stop",
                    "temperature", "max_tokens")


class ControlError(ValueError):
    """A control the run cannot follow; its message is shown to the user as it is."""


@dataclass(frozen=True)
class DebugSettings:
    step_mode: bool = False
    break_tools: frozenset[str] = frozenset()
    break_on_error: bool = False
    break_on_reflection: bool = False
    break_kinds: frozenset[str] = frozenset()  # hold before every call of these kinds

    @classmethod
    def from_frame(cls, frame: dict[str, Any]) -> DebugSettings:
        """From a "debug" frame; missing keys are off, wrong types are refused by name."""
        flags = {}
        for key in ("step_mode", "break_on_error", "break_on_reflection"):
            value = frame.get(key, False)
            if not isinstance(value, bool):
                raise ControlError(f'"{key}" must be true or false')
            flags[key] = value
        tools = frame.get("break_tools", [])
        if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
            raise ControlError('"break_tools" must be a list of tool names')
        kinds = frame.get("break_kinds", [])
        if not isinstance(kinds, list) or not all(  # each compared, never hashed: [[…]] too
                isinstance(k, str) and k in BREAK_KINDS for k in kinds):
            raise ControlError(f'"break_kinds" must be a list of {" and ".join(BREAK_KINDS)}')
        return cls(break_tools=frozenset(t.strip() for t in tools if t.strip()),
                   break_kinds=frozenset(kinds), **flags)

    def to_dict(self) -> dict[str, Any]:
        return {"step_mode": self.step_mode, "break_tools": sorted(self.break_tools),
                "break_on_error": self.break_on_error,
                "break_on_reflection": self.break_on_reflection,
                "break_kinds": sorted(self.break_kinds)}


class Publisher(Protocol):
    async def status(self, status: str, detail: dict[str, Any]) -> None: ...
    async def approval(self, step: Step, expires_at: float | None = None) -> None: ...


class GroupPublisher:
    """Statuses through the run's Recorder (persisted, then published); approval requests
    only published, after the steps before them (the approval step itself is in the trace)."""

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        self.recorder = Recorder(run_id)

    async def status(self, status: str, detail: dict[str, Any]) -> None:
        await self.recorder.status(status, detail)

    async def approval(self, step: Step, expires_at: float | None = None) -> None:
        self.recorder.publish(approval_message(step, expires_at))


def approval_message(step: Step, expires_at: float | None = None) -> dict[str, Any]:
    return {"type": "run.approval", "seq": step.seq, "tool": step.name,
            "arguments": step.input, "expires_at": expires_at}


def approval_ttl_s() -> float:
    """How long a tool call waits for a decision (settings.AGENTLAB_APPROVAL_TTL_S, ≥ 1 s)."""
    return max(1, settings.AGENTLAB_APPROVAL_TTL_S)


def expired(ttl_s: float) -> Approval:
    return Approval(False, reason=f"nobody approved or denied it within {_span(ttl_s)}, "
                                  "so the approval expired")


def _span(seconds: float) -> str:
    if seconds >= 120 and seconds % 60 == 0:
        return f"{int(seconds // 60)} minutes"
    return f"{seconds:g} s"


@dataclass
class Pause:
    step: Step
    reason: str
    waiting_for: Literal["step", "approval"]
    future: asyncio.Future[Any]
    edit: dict[str, Any] | None = None
    expires_at: float | None = None  # epoch s: an approval not decided by then is denied

    def detail(self) -> dict[str, Any]:
        pending = self.step.to_dict()
        if self.edit is not None:
            pending["input"] = (self.edit if self.step.kind != "llm"
                                else {**(self.step.input or {}), **self.edit})
        detail = {"reason": self.reason, "waiting_for": self.waiting_for, "pending": pending,
                "edited": self.edit is not None}
        if self.expires_at is not None:  # the page says how long the call still waits
            detail["expires_at"] = self.expires_at
        return detail


@dataclass
class RunControl:
    run_id: int
    publisher: Publisher | None = None
    cancel_run: Callable[[int], bool] = execution.cancel
    settings: DebugSettings = field(default_factory=DebugSettings)
    pauses: dict[int, Pause] = field(default_factory=dict)  # seq -> what waits there
    _pause_next: str | None = None  # why the next checkpoint pauses (pause, step, breakpoint)
    _seen_after: set[int] = field(default_factory=set)
    # How long a held call may wait (None: as long as it takes); the gateway's calls have a
    # client on the other end that gives up (agentlab/gateway/control.py).
    hold_s: float | None = None

    def __post_init__(self) -> None:
        if self.publisher is None:
            self.publisher = GroupPublisher(self.run_id)

    # ------------------------------------------------------------------ hooks of the run

    async def checkpoint(self, step: Step) -> dict[str, Any] | None:
        """Before an LLM or tool call: pause if asked to; returns the edited input or None."""
        reason = self._why_pause(step)
        if reason is None:
            return None
        expires = time.time() + self.hold_s if self.hold_s is not None else None
        pause = await self._wait(Pause(step, reason, "step", self._future(),
                                       expires_at=expires))
        if pause.future.result() == "step":
            self._pause_next = "stepped: paused at the next checkpoint"
        return pause.edit

    async def approve(self, step: Step) -> Approval:
        """A call that needs approval waits for a decision, watched or not, for at most the
        approval time-to-live; then it is denied with a reason that says so, and the run goes
        on (the model sees the denial like any other)."""
        assert self.publisher is not None
        ttl = approval_ttl_s()
        pause = Pause(step, f"{step.name} needs approval", "approval", self._future(),
                      expires_at=time.time() + ttl)
        expiry = asyncio.get_running_loop().call_later(ttl, _decide_once, pause.future,
                                                       expired(ttl))
        self.pauses[step.seq] = pause
        try:
            await self.publisher.approval(step, pause.expires_at)
            await self._wait(pause)
        finally:
            expiry.cancel()
        return pause.future.result()

    def _why_pause(self, step: Step) -> str | None:
        reason = self.reason_to_pause(step)
        self._pause_next = None
        return reason

    def reason_to_pause(self, step: Step) -> str | None:
        """Why a checkpoint now would pause at `step` (None: it would go on); only asks."""
        if self._pause_next is not None:
            return self._pause_next
        if self.settings.step_mode:
            return f"step mode: before the {step.kind} call {step.name}".rstrip()
        if step.kind == "tool" and step.name in self.settings.break_tools:
            return f"breakpoint on the tool {step.name}"
        if step.kind in self.settings.break_kinds:
            return f"breakpoint on every {step.kind} call: {step.name}".rstrip(": ")
        return None

    async def _wait(self, pause: Pause) -> Pause:
        assert self.publisher is not None
        self.pauses[pause.step.seq] = pause
        await self.publisher.status("paused", self.detail())
        try:
            await pause.future
        finally:  # also when the run is cancelled while it waits
            self.pauses.pop(pause.step.seq, None)
        await self.publisher.status(*self._state())
        return pause

    def _future(self) -> asyncio.Future[Any]:
        return asyncio.get_running_loop().create_future()

    # ------------------------------------------------------------------ watcher sink

    async def step(self, step: Step) -> None:
        """Breakpoints that fire after a step pause at the next checkpoint, saying why."""
        if step.status == "running" or step.seq in self._seen_after:
            return
        what = None
        if self.settings.break_on_error and step.status == "error" and step.kind != "final":
            what = f"breakpoint: step {step.seq} ({step.kind} {step.name}".rstrip() + ") failed"
        elif self.settings.break_on_reflection and step.kind == "reflection":
            what = f"breakpoint: reflection at step {step.seq}"
        if what:
            self._seen_after.add(step.seq)
            self._pause_next = what

    async def token(self, seq: int, delta: str) -> None:
        pass

    async def status(self, status: str, detail: dict[str, Any]) -> None:
        pass

    # ------------------------------------------------------------------ controls

    async def act(self, frame: dict[str, Any]) -> None:
        """Follow one browser frame (pause/resume/step/cancel/debug/edit/approve/deny)."""
        action = frame["action"]
        if action == "pause":
            if not any(p.waiting_for == "step" for p in self.pauses.values()):
                self._pause_next = "paused by the user"
        elif action in ("resume", "step"):
            self._release(action)
        elif action == "cancel":
            self.cancel()
        elif action == "debug":
            self.settings = DebugSettings.from_frame(frame)
        elif action == "edit":
            await self._edit(frame)
        elif action in ("approve", "deny"):
            self._decide(frame, approved=action == "approve")
        else:
            raise ControlError(f"unknown action {action!r}")

    def cancel(self) -> None:
        if not self.cancel_run(self.run_id):
            raise ControlError("the run is not active")
        for pause in list(self.pauses.values()):  # wake the waiters; the run then stops
            if not pause.future.done():
                pause.future.cancel()

    def _release(self, action: str) -> None:
        waiting = [p for p in self.pauses.values() if p.waiting_for == "step"]
        if not waiting:
            if action == "step":  # not paused: "step" pauses at the next checkpoint
                self._pause_next = "stepped: paused at the next checkpoint"
                return
            raise ControlError("the run is not paused" + (
                " (a tool call waits for approve or deny)" if self.pauses else ""))
        for pause in waiting:
            pause.future.set_result(action)

    async def _edit(self, frame: dict[str, Any]) -> None:
        pause = self._paused_at(frame, "step")
        new = frame.get("input")
        if not isinstance(new, dict):
            raise ControlError('"input" must be a JSON object (the edited arguments or request)')
        self.check_edit(pause.step, new)
        pause.edit = copy.deepcopy(new)
        await self.announce()

    def check_edit(self, step: Step, new: dict[str, Any]) -> None:
        """Refuse, by name, an edit the held step cannot take (ControlError)."""
        if step.kind == "llm":
            if unknown := sorted(set(new) - set(LLM_REQUEST_KEYS)):
                raise ControlError(f"an LLM request has no field {', '.join(unknown)}")
            if "messages" in new and not isinstance(new["messages"], list):
                raise ControlError('"messages" must be a list of messages')

    async def announce(self) -> None:
        """Tell the watchers where the run stands now (paused with what waits, or running)."""
        assert self.publisher is not None
        await self.publisher.status(*self._state())

    def _decide(self, frame: dict[str, Any], *, approved: bool) -> None:
        pause = self._paused_at(frame, "approval")
        arguments = frame.get("arguments") if approved else None
        if arguments is not None and not isinstance(arguments, dict):
            raise ControlError('"arguments" must be a JSON object')
        reason = frame.get("reason") or ""
        if not isinstance(reason, str):
            raise ControlError('"reason" must be text')
        pause.future.set_result(Approval(approved, arguments=arguments, reason=reason))

    def _paused_at(self, frame: dict[str, Any], waiting_for: str) -> Pause:
        seq = frame.get("seq")
        pause = self.pauses.get(seq) if isinstance(seq, int) else None
        if pause is None or pause.waiting_for != waiting_for or pause.future.done():
            what = "an approval" if waiting_for == "approval" else "the run to go on"
            raise ControlError(f"step {seq} is not waiting for {what}")
        return pause

    # ------------------------------------------------------------------ state for watchers

    def detail(self) -> dict[str, Any]:
        """The status detail of a paused run: the first pending step, and all that wait."""
        if not self.pauses:
            return {}
        first = self.pauses[min(self.pauses)]
        return {**first.detail(), "waiting": sorted(self.pauses),
                "settings": self.settings.to_dict()}

    def _state(self) -> tuple[str, dict[str, Any]]:
        return ("paused", self.detail()) if self.pauses else ("running", {})

    def approvals(self) -> list[Step]:
        return [p.step for p in self._approval_pauses()]

    def approval_messages(self) -> list[dict[str, Any]]:
        """The calls waiting for approve or deny, as their run.approval events (with expiry)."""
        return [approval_message(p.step, p.expires_at) for p in self._approval_pauses()]

    def _approval_pauses(self) -> list[Pause]:
        return [p for _, p in sorted(self.pauses.items()) if p.waiting_for == "approval"]


def _decide_once(future: asyncio.Future[Any], decision: Approval) -> None:
    if not future.done():
        future.set_result(decision)


# ---------------------------------------------------------------------- this process's runs

def get(run_id: int) -> RunControl | None:
    entry = REGISTRY.entry(run_id)
    return entry.control if entry is not None else None


def start(run: Any, settings: DebugSettings | None = None, **hooks: Any) -> RunControl:
    """Launch `run` (a traces Run) in this loop under a new RunControl; call from async code."""
    control = RunControl(run.pk, settings=settings or DebugSettings())
    REGISTRY.put(run.pk, control=control)
    task = execution.launch(run, checkpoint=control.checkpoint, approver=control.approve,
                         watchers=(control,), **hooks)
    task.add_done_callback(lambda _t: REGISTRY.clear(run.pk, "control", only=control))
    return control

