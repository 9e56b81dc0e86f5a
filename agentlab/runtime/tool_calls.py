"""A RunContext's tool calls (`ctx.tool`): the loop check, an earlier identical call answered
from its observation, approval and the edit at the checkpoint, the call itself, and the step
that records it; calls the runtime does not run (a loop, a denial) still get a tool step."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentlab.runtime import slots
from agentlab.runtime.limits import Limits, LoopDetected, Totals, deadline_lifted
from agentlab.runtime.sinks import StepSink, durable
from agentlab.tools.executor import ToolResult
from traces.schema import Step, normalise_args

# Failures that the same call meets again (its arguments, the tool's own refusal, a tool that is
# unknown, off or not allowed): a repeat is answered from the record, not run. A timeout may
# pass, so a timed-out call runs again.
SAME_AGAIN = frozenset({"validation", "exception", "unknown_tool", "disabled", "permission"})

if TYPE_CHECKING:
    from agentlab.runtime.guard import RunGuard
    from agentlab.tools.executor import ToolExecutor

LoopHook = Callable[[str, Any, int | None], Awaitable[str]]  # (tool, args, parent) -> nudge


@dataclass
class Approval:
    approved: bool
    arguments: dict[str, Any] | None = None  # edited arguments, when the user changed them
    reason: str = ""


def _denied(decision: Approval) -> str:
    return f"Error: the user denied this call: {decision.reason or 'denied'}"


async def deny_all(step: Step) -> Approval:
    """The approver of a run nobody watches: every call that needs approval is denied."""
    return Approval(False, reason="no approver is attached to this run")


class ToolCalls:
    """The tool half of RunContext (agentlab/runtime/context.py), which provides the state and
    the step methods named below."""

    executor: ToolExecutor
    sink: StepSink
    limits: Limits
    totals: Totals
    guard: RunGuard | None
    findings: list[str]
    approver: Callable[[Step], Awaitable[Approval]]
    on_loop: LoopHook | None
    timeout: asyncio.Timeout | None
    _calls: list[str]
    _answered: dict[str, tuple[int, ToolResult]]

    if TYPE_CHECKING:
        async def emit(self, step: Step, *, counted: bool = True) -> Step: ...
        async def finish(self, step: Step, *, status: str = "ok", started: float | None = None,
                         **fields: Any) -> Step: ...
        async def checkpoint(self, step: Step) -> dict[str, Any] | None: ...
        async def _decided(self, decisions: list[dict[str, Any]],
                           target: Step | None) -> None: ...
        def raise_if_cancelled(self) -> None: ...
        def shown(self, step: Step) -> Step: ...

    async def tool(self, name: str, args: Any, *, parent: int | None = None,
                   role: str = "agent", meta: dict[str, Any] | None = None) -> ToolResult:
        """One recorded tool call: loop check, approval, checkpoint, run, `tool` step. Arguments
        edited at the checkpoint after an approval are approved again before they run."""
        self.raise_if_cancelled()
        nudge = await self._check_loop(name, args, parent)
        if nudge is not None:
            return await self._refused(name, args, nudge, "loop", parent=parent, role=role)
        needs_approval = self.executor.needs_approval(name)
        key = f"{name} {normalise_args(args)}"
        if not needs_approval and key in self._answered:
            return await self._repeated(name, args, *self._answered[key], parent=parent,
                                        role=role)
        if needs_approval:
            decision = await self._approve(name, args, parent=parent, role=role)
            if not decision.approved:
                return await self._refused(name, args, _denied(decision), "denied",
                                           parent=parent, role=role)
            if decision.arguments is not None:
                args = decision.arguments
        step = await self.emit(Step(kind="tool", role=role, name=name, parent=parent,
                                    input=args, status="running", meta=dict(meta or {})))
        edited = await self.checkpoint(step)
        if edited is not None:
            approved, args = args, edited
            step.input = edited
            step.meta["edited"] = True
            if needs_approval and normalise_args(edited) != normalise_args(approved):
                # The person approved other arguments: these wait for their own decision.
                decision = await self._approve(name, args, parent=parent, role=role)
                if not decision.approved:
                    return await self._denied_at(step, decision)
                if decision.arguments is not None:
                    args = step.input = decision.arguments
        async with slots.waiting():
            await durable(self.sink)  # what led to this call is in the trace before it acts
        started = time.perf_counter()
        self.totals.tool_calls += 1
        try:
            async with slots.waiting():
                result = await self.executor.run(name, args, timeout_s=self.limits.tool_timeout_s)
        except asyncio.CancelledError:
            await self._interrupted(step, started)
            raise
        self.totals.tool_ms += (time.perf_counter() - started) * 1000
        decisions: list[dict[str, Any]] = []
        if self.guard is not None:  # redacted before the model reads it, too
            result, decisions = await self.guard.atool_result(result)
        if result.ok:
            self.findings.append(result.observation)
        if result.ok or result.error_type in SAME_AGAIN:
            self._answered[key] = (step.seq, result)
        if result.truncated:
            step.meta["truncated"] = True  # the full value stays in output
        await self.finish(step, status="ok" if result.ok else "error", started=started,
                          output=result.to_dict(), text=result.observation)
        if decisions:
            await self._decided(decisions, step)
        return result

    async def _repeated(self, name: str, args: Any, seq: int, earlier: ToolResult, *,
                        parent: int | None, role: str) -> ToolResult:
        """The same call as an earlier one that succeeded or failed for good (SAME_AGAIN):
        answered from that observation, with a note, instead of being run again (small models
        repeat a call whose result they have, and one whose error they did not read; the loop
        detector still counts it)."""
        if earlier.ok:
            note = ("this was its result; it will not change. Use it to answer, or call another "
                    "tool.")
        else:
            note = ("this was its error; the same call fails again. Change the arguments, or "
                    "call another tool.")
        observation = (f"{earlier.observation}\n\nNote: you already called {name} with these "
                       f"arguments and {note}")
        result = dataclasses.replace(earlier, arguments=args, observation=observation,
                                     duration_ms=0.0)
        await self.emit(Step(kind="tool", role=role, name=name, parent=parent, input=args,
                             output=result.to_dict(), text=observation,
                             status="ok" if earlier.ok else "error",
                             duration_ms=0.0, meta={"repeat_of": seq}))
        return result

    async def _denied_at(self, step: Step, decision: Approval) -> ToolResult:
        # An emitted tool step whose edited call was denied: finished as the refusal it is.
        observation = _denied(decision)
        result = ToolResult(tool=step.name, arguments=step.input, ok=False, output="",
                            observation=observation, error=observation, error_type="denied")
        step.meta["denied"] = True
        await self.finish(step, status="error", output=result.to_dict(), text=observation,
                          duration_ms=0.0)
        return result

    async def _interrupted(self, step: Step, started: float) -> None:
        # Cancelled or timed out mid-call: the step must not stay "running" in the trace.
        await self.finish(step, status="error", started=started,
                          output={"error": "interrupted (cancelled or out of time)"},
                          meta={**step.meta, "interrupted": True})

    async def _check_loop(self, name: str, args: Any, parent: int | None) -> str | None:
        key = f"{name} {normalise_args(args)}"
        self._calls.append(key)
        repeats = self.limits.max_repeats
        if repeats < 1 or self._calls[-repeats:] != [key] * repeats:
            return None
        reason = f"the agent called {name} with the same arguments {repeats} times in a row"
        if self.on_loop is None:
            raise LoopDetected(reason)
        return await self.on_loop(name, args, parent)

    async def _approve(self, name: str, args: Any, *, parent: int | None,
                       role: str) -> Approval:
        step = await self.emit(Step(kind="approval", role=role, name=name, parent=parent,
                                    input=args, status="running"))
        started = time.perf_counter()
        shown = self.shown(step)  # a person decides on what the trace shows: redacted
        with deadline_lifted(self.timeout):
            async with slots.waiting():
                decision = await self.approver(shown)
        self.raise_if_cancelled()
        if decision.arguments is not None and shown is not step \
                and normalise_args(decision.arguments) == normalise_args(shown.input):
            # Approved as shown: the call runs as the model wrote it, not with the markers.
            decision = dataclasses.replace(decision, arguments=None)
        step.meta.update(approved=decision.approved, reason=decision.reason)
        await self.finish(step, started=started, output={
            "approved": decision.approved, "arguments": decision.arguments,
            "reason": decision.reason,
        }, text=("approved" if decision.approved else f"denied: {decision.reason}"))
        return decision

    async def _refused(self, name: str, args: Any, observation: str, why: str, *,
                       parent: int | None, role: str) -> ToolResult:
        # A call the runtime did not run still gets a tool step: the trace shows what the model
        # was told, and the paradigm treats it like any failed call.
        result = ToolResult(tool=name, arguments=args, ok=False, output="",
                            observation=observation, error=observation, error_type=why)
        await self.emit(Step(kind="tool", role=role, name=name, parent=parent, input=args,
                             output=result.to_dict(), text=observation, status="error",
                             duration_ms=0.0, meta={why: True}))
        return result
