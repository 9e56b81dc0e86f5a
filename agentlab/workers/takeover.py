"""A run taken over by another worker continues from its own trace.

The worker that held the run stopped (killed, or its machine went away) mid-run. The new
worker executes the run again from the start in the same Run, with the fork machinery
(agentlab/forks/): its LLM replies and tool results are served from the steps already recorded
(`Recording(paid=True)`: they were paid for once, by this run), so no tool with effects runs
twice and the run takes the same path. What was already in the trace is not written or shown
again (`TakeoverSink` drops it, as long as the new execution stays on the record); the first
new step carries `meta["taken_over"]`: by which worker, from which, after which step. From
there the run goes live as it would have.

A call that was under way when the worker stopped (a `running` row) is made again: an LLM call
is asked again, a tool call runs again only after the checks any call gets (a tool that needs
approval waits for a person again; a recorded approval decides only calls served from the
record). Checkpoints (step mode, breakpoints) are not hit again for the recorded part.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from django.utils import timezone

from agentlab.forks.record import (
    ForkError,
    MarkingSink,
    ReplayPlan,
    Source,
    recorded_approvals,
    recorded_calls,
    recorded_tools,
    source_of,
)
from agentlab.forks.recorded_tools import ToolRecording
from agentlab.llm.replay import RecordedCall, Recording
from agentlab.runtime.context import RunContext
from agentlab.runtime.sinks import durable
from traces.models import Run
from traces.schema import Step


@dataclasses.dataclass
class TakeoverPlan(ReplayPlan):
    recorded: frozenset[int] = frozenset()  # seqs of the steps already finished in the trace
    note: dict[str, Any] = dataclasses.field(default_factory=dict)  # meta["taken_over"]
    follows_record: bool = False  # a replay, fork or resume: its steps are marked as it goes
    first_divergence: dict[str, Any] | None = None  # found before the takeover

    @property
    def resume_after(self) -> int:
        return max(self.recorded, default=0)

    def wrap_sink(self, inner: Any) -> Any:
        if self.follows_record:
            marking = MarkingSink(inner, self)
            marking.first_divergence = self.first_divergence
            inner = marking
        return TakeoverSink(inner, self)

    def prepare(self, ctx: RunContext) -> None:
        super().prepare(ctx)
        hook = ctx.checkpoint_hook
        if hook is not None:
            async def checkpoint(step: Step) -> dict[str, Any] | None:
                if self.on_record(step.seq):
                    return None  # paused (or stepped) there already, before the takeover
                return await hook(step)

            ctx.checkpoint_hook = checkpoint

    def on_record(self, seq: int) -> bool:
        return seq in self.recorded and not self.recording.diverged


def plan_takeover(run: Run, *, by: str, previous: str) -> TakeoverPlan:
    """The plan that continues `run` from its trace (its steps as they are in the database),
    then from the record it follows, if any."""
    steps = list(run.steps.all())
    finished = frozenset(s.seq for s in steps if s.status != "running")
    last = max(finished, default=0)
    calls, tools = recorded_calls(steps), recorded_tools(steps)
    approvals = recorded_approvals(steps)
    divergence = first_divergence(steps)
    try:
        source = source_of(run)
    except ForkError:  # its source is gone: what its own trace holds is all there is
        source = None
    fork_at: int | None = last
    edited_reply, edited_observation = None, None
    if source is not None and divergence is None and (source.fork_at is None
                                                      or last < source.fork_at):
        rest = _after(source, last)
        calls += [RecordedCall(c.seq, c.request, {**c.response, "cost_usd": 0.0})
                  for c in source.calls if rest(c.seq)]
        tools += [t for t in source.tools or () if rest(t.seq)]
        approvals += [a for a in source.approvals if rest(a.seq)]
        fork_at = source.fork_at
        edited_reply, edited_observation = source.edited_reply, source.edited_observation
    recording = Recording(calls, fork_at=fork_at, paid=True, edited_reply=edited_reply)
    tool_recording = ToolRecording(tools, fork_at=fork_at, approvals=approvals,
                                   edited_observation=edited_observation)
    note = {"by": by, "from": previous, "after_seq": last, "at": timezone.now().isoformat()}
    return TakeoverPlan(run, recording, tool_recording, recorded=finished, note=note,
                        follows_record=source is not None, first_divergence=divergence)


def _after(source: Source, last: int) -> Any:
    """Which of the source's steps the run has yet to reach: after its trace, up to the fork."""
    return lambda seq: seq > last and (source.fork_at is None or seq <= source.fork_at)


def first_divergence(steps: list[Any]) -> dict[str, Any] | None:
    """The first step of a trace that left its record, as MarkingSink stores it."""
    for step in steps:
        meta = step.meta or {}
        if "diverged_from" in meta:
            return {"seq": step.seq, "source_seq": meta["diverged_from"],
                    "fields": meta.get("divergence_fields", []),
                    "detail": meta.get("divergence", "")}
    return None


class TakeoverSink:
    """Drops what the trace already holds while the run replays its record; marks the first
    step that is new."""

    def __init__(self, inner: Any, plan: TakeoverPlan) -> None:
        self.inner = inner
        self.plan = plan
        self.marked: int | None = None  # the seq of the first new step
        self.off_record = False  # a recorded step came out differently: write from here on

    async def step(self, step: Step) -> None:
        if self._known(step):
            return
        if self.marked is None:
            self.marked = step.seq
        if step.seq == self.marked:
            step.meta["taken_over"] = dict(self.plan.note)
        await self.inner.step(step)

    def _known(self, step: Step) -> bool:
        """The step is one the trace has, produced again from the record."""
        if self.off_record or not self.plan.on_record(step.seq):
            return False
        if step.status == "running":
            return True  # its end decides
        served = True
        if step.kind == "llm":
            outcome = self.plan.recording.claim(step.input or {})
            served = outcome is not None and outcome.kind == "replayed"
        elif step.kind == "tool" and self.plan.tools is not None:
            served = self.plan.tools.claim(step.name, step.input) is not None
        if not served:
            self.off_record = True  # then this and every later step is written again
        return served

    async def token(self, seq: int, delta: str) -> None:
        if self.off_record or not self.plan.on_record(seq):
            await self.inner.token(seq, delta)

    async def durable(self) -> None:
        await durable(self.inner)

    async def status(self, status: str, detail: dict[str, Any]) -> None:
        await self.inner.status(status, detail)
