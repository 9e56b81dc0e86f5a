"""What a replay, fork or resume follows, read back from the database wherever it executes.

A run that re-executes another says so in its own rows, written by the web process that decided
who may do it (agentlab.forks.plans): `parent_run` (the source), `fork_seq` (the fork's step),
and in its snapshot `fork` or `replay_of` + `replay` (the options) and `fork_edit` (the user's
edit of the fork's step). `plan_for(run)` rebuilds the run's ReplayPlan from those rows and the
source's recorded steps alone, in the process that executes the run: this one, or a worker of
the scale profile (agentlab.runs.engine.start_here). No Python object travels with the run, and
a worker trusts nothing but the database. A run taken over by another worker follows its own
trace first, then this record (agentlab.workers.takeover).

The plan: `prepare` wraps the new run's models in ReplayModels and its executor in a
RecordedExecutor, so the source's replies and observations are served while the new run
re-records its own steps, and its sink marks each step that came from the record
(meta replayed/source_seq) or left it (meta diverged_from).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from asgiref.sync import sync_to_async

from agentlab.forks.recorded_tools import (
    RecordedApproval,
    RecordedExecutor,
    RecordedTool,
    ToolRecording,
)
from agentlab.llm.replay import RecordedCall, Recording, marks, replay_models
from agentlab.runtime.context import RunContext
from agentlab.runtime.sinks import durable
from agentlab.tools.executor import ToolExecutor
from traces.models import Run, Step
from traces.schema import FINISHED_STATUSES
from traces.schema import Step as StepRecord


class ForkError(ValueError):
    """The request cannot be met (a step that cannot be edited, a run that cannot resume, a
    source that is gone)."""


# ------------------------------------------------------------------ the source's record


def recorded_calls(steps: Iterable[Step]) -> list[RecordedCall]:
    """The llm steps that got a reply (an interrupted or failed call has nothing to serve)."""
    return [RecordedCall(s.seq, s.input or {}, s.output) for s in steps
            if s.kind == "llm" and s.status == "ok" and isinstance(s.output, dict)
            and "text" in s.output]


def recorded_tools(steps: Iterable[Step]) -> list[RecordedTool]:
    """The tool steps the executor answered (not the runtime's refusals, not interrupted)."""
    return [RecordedTool(s.seq, s.name, s.input, s.output) for s in steps
            if s.kind == "tool" and s.status != "running" and isinstance(s.output, dict)
            and "observation" in s.output
            and not {"loop", "denied", "interrupted"} & set(s.meta or {})]


def recorded_approvals(steps: Iterable[Step]) -> list[RecordedApproval]:
    return [RecordedApproval(s.seq, s.name, s.input, s.output) for s in steps
            if s.kind == "approval" and isinstance(s.output, dict)]


@dataclasses.dataclass(frozen=True)
class Source:
    """What a re-execution serves: the source's recorded calls, tool results (None: tools run
    live) and approvals, up to `fork_at` (None: all of it, a replay), that step edited."""

    calls: list[RecordedCall]
    tools: list[RecordedTool] | None
    approvals: list[RecordedApproval]
    fork_at: int | None = None
    edited_reply: Mapping[str, Any] | None = None
    edited_observation: str | None = None

    def recording(self) -> Recording:
        return Recording(self.calls, fork_at=self.fork_at, edited_reply=self.edited_reply)

    def tool_recording(self) -> ToolRecording | None:
        if self.tools is None:
            return None
        return ToolRecording(self.tools, fork_at=self.fork_at,
                             edited_observation=self.edited_observation,
                             approvals=self.approvals)


def source_of(run: Run) -> Source | None:
    """The record `run` follows, read from the database; None for a run that follows none.
    ForkError when it cannot be read (its source, or the fork's step, is gone)."""
    snap = run.agent_snapshot if isinstance(run.agent_snapshot, dict) else {}
    fork = snap.get("fork")
    if not isinstance(fork, dict) and "replay_of" not in snap:
        return None
    if run.parent_run_id is None:
        raise ForkError(f"run {run.pk} re-executes a run that was deleted since: there is no "
                        "record to follow")
    steps = list(Step.objects.filter(run_id=run.parent_run_id).order_by("seq"))
    calls, approvals = recorded_calls(steps), recorded_approvals(steps)
    if not isinstance(fork, dict):
        replay = snap.get("replay") if isinstance(snap.get("replay"), dict) else {}
        tools = recorded_tools(steps) if replay.get("tools") == "recorded" else None
        return Source(calls, tools, approvals)
    if run.fork_seq is None or not any(s.seq == run.fork_seq for s in steps):
        raise ForkError(f"run {run.parent_run_id} has no step {run.fork_seq} any more")
    edit = snap.get("fork_edit") if isinstance(snap.get("fork_edit"), dict) else {}
    reply, observation = edit.get("reply"), edit.get("observation")
    return Source(calls, recorded_tools(steps), approvals, fork_at=run.fork_seq,
                  edited_reply=reply if isinstance(reply, dict) else None,
                  edited_observation=observation if isinstance(observation, str) else None)


# ------------------------------------------------------------------ the plan of a new run


@dataclasses.dataclass
class ReplayPlan:
    """A created (queued) Run and the recordings its context is wired to."""

    run: Run
    recording: Recording
    tools: ToolRecording | None  # None: every tool runs live

    def prepare(self, ctx: RunContext) -> None:
        """The runner's hook: wrap the context's models, tools, approvals and sink."""
        ctx.models = replay_models(ctx.models, self.recording)
        ctx.sink = self.wrap_sink(ctx.sink)
        if self.tools is not None:
            ctx.executor = RecordedExecutor(ctx.executor, self.tools)
            ctx.approver = self.tools.approver(ctx.approver, own=ctx.own)
        # Multi-Agent members with their own models and tools follow the same record.
        ctx.agents = {name: dataclasses.replace(
            spec,
            models=replay_models(spec.models, self.recording) if spec.models else None,
            executor=self._executor(spec.executor),
        ) for name, spec in ctx.agents.items()}

    def wrap_sink(self, inner: Any) -> Any:
        """The sink the new run records through: marks what came from the record."""
        return MarkingSink(inner, self)

    def _executor(self, executor: ToolExecutor | None) -> ToolExecutor | None:
        if executor is None or self.tools is None:
            return executor
        return RecordedExecutor(executor, self.tools)

    def summary(self) -> dict[str, Any]:
        tools = self.tools
        return {"served_llm": len(self.recording.served), "live_llm": self.recording.live_calls,
                "unused_llm": self.recording.unused,
                "served_tools": len(tools.served) if tools else 0,
                "live_tools": tools.live_calls if tools else None}


def plan_for(run: Run) -> ReplayPlan | None:
    """The plan of a replay, fork or resume run, rebuilt from the database (None: the run
    follows no record); ForkError when its record cannot be read."""
    source = source_of(run)
    if source is None:
        return None
    return ReplayPlan(run, source.recording(), source.tool_recording())


def prepare_for(run: Run) -> Callable[[RunContext], None] | None:
    """What agentlab.runs.engine runs before a run executes anywhere (agentlab.apps installs
    it): the run's replay plan, when it follows a record."""
    plan = plan_for(run)
    return plan.prepare if plan is not None else None


class MarkingSink:
    """Marks each finished llm/tool step with where its result came from, then passes it on;
    at the end, stores the first divergence and a summary in the run's snapshot."""

    def __init__(self, inner: Any, plan: ReplayPlan) -> None:
        self.inner = inner
        self.plan = plan
        self._marked: set[int] = set()
        self.first_divergence: dict[str, Any] | None = None

    async def step(self, step: StepRecord) -> None:
        if step.status != "running" and step.seq not in self._marked:
            if step.kind == "llm":
                self._mark_llm(step)
            elif step.kind == "tool" and self.plan.tools is not None:
                self._mark_tool(step)
        await self.inner.step(step)

    def _mark_llm(self, step: StepRecord) -> None:
        outcome = self.plan.recording.claim(step.input or {})
        if outcome is None:
            return
        self._marked.add(step.seq)
        step.meta.update(marks(outcome))
        if outcome.divergence is not None and self.first_divergence is None:
            self.first_divergence = {"seq": step.seq, **outcome.divergence.to_dict()}

    def _mark_tool(self, step: StepRecord) -> None:
        assert self.plan.tools is not None
        outcome = self.plan.tools.claim(step.name, step.input)
        if outcome is not None:
            self._marked.add(step.seq)
            step.meta.update(replayed=True, source_seq=outcome.source_seq)
            if outcome.edited:
                step.meta["edited"] = True

    async def token(self, seq: int, delta: str) -> None:
        await self.inner.token(seq, delta)

    async def durable(self) -> None:  # a fork's live tools wait for its rows too
        await durable(self.inner)

    async def status(self, status: str, detail: dict[str, Any]) -> None:
        if status in FINISHED_STATUSES:
            await sync_to_async(self._save_summary, thread_sensitive=False)()
        await self.inner.status(status, detail)

    def _save_summary(self) -> None:
        snap = dict(self.plan.run.agent_snapshot)
        snap["replay"] = {**snap.get("replay", {}), **self.plan.summary()}
        if self.first_divergence is not None:
            snap["first_divergence"] = self.first_divergence
        self.plan.run.agent_snapshot = snap
        Run.objects.filter(pk=self.plan.run.pk).update(agent_snapshot=snap)
