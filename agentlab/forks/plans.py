"""Replay, fork and resume: a new Run that re-executes a recorded one (DESIGN.md "Replay, fork,
diff").

The new run is executed by the ordinary runner; `prepare` wraps its models in ReplayModels and
its executor in a RecordedExecutor, so the source's replies and observations are served while the
new run re-records its own steps, and its sink marks each step that came from the record
(meta replayed/source_seq) or left it (meta diverged_from). Replay serves everything; a fork at
step k serves steps 1..k (k's output edited if the user says so) and goes live after.

The source's snapshot is a record (of an old run, or of an imported bundle): it is read, never
run. The new run binds to today's configuration (`bind`): the source's agent row, else the agent
of the same name, else one the user chose; its models, tools, policies and limits are today's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from asgiref.sync import sync_to_async
from django.db import transaction

from agentlab.forks.recorded_tools import (
    RecordedApproval,
    RecordedExecutor,
    RecordedTool,
    ToolRecording,
)
from agentlab.live import control as live
from agentlab.llm.replay import RecordedCall, Recording, replay_models
from agentlab.models import Agent
from agentlab.runs import tasks
from agentlab.runs.snapshot import RECORDED_FIELDS, snapshot
from agentlab.runtime.context import RunContext
from agentlab.runtime.sinks import durable
from agentlab.tools.executor import ToolExecutor
from traces.models import Run, Step
from traces.schema import FINISHED_STATUSES
from traces.schema import Step as StepRecord
from traces.workers import worker_id


class ForkError(ValueError):
    """The request cannot be met (a step that cannot be edited, a run that cannot resume)."""


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
            ctx.approver = self.tools.approver(ctx.approver)
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
        if outcome.kind in ("replayed", "edited"):
            step.meta.update(replayed=True, source_seq=outcome.source_seq)
            if outcome.kind == "edited":
                step.meta["edited"] = True
        elif outcome.divergence is not None:
            d = outcome.divergence
            step.meta.update(diverged_from=d.source_seq, divergence=d.detail,
                             divergence_fields=list(d.fields))
            if self.first_divergence is None:
                self.first_divergence = {"seq": step.seq, **d.to_dict()}

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


# ------------------------------------------------------------------ binding to today


class NeedsAgent(ForkError):
    """The run's agent is not configured here (an imported run, or its agent was deleted):
    the user has to choose the agent whose configuration it goes live with."""


BindingKind = Literal["the run's agent", "the agent of the same name", "chosen"]


def bound_agent(source: Run, chosen: int | None = None) -> tuple[Agent, BindingKind]:
    """The agent a run goes live with: its agent row if it still exists, else the agent with
    its agent name, else the one the user chose. Never anything the snapshot names."""
    if source.agent_id is not None and (agent := Agent.objects.filter(
            pk=source.agent_id).first()) is not None:
        return agent, "the run's agent"
    if source.agent_name and (agent := Agent.objects.filter(
            name=source.agent_name).first()) is not None:
        return agent, "the agent of the same name"
    if chosen is not None:
        agent = Agent.objects.filter(pk=chosen).first()
        if agent is None:
            raise ForkError(f"there is no agent {chosen}; choose one of the list")
        return agent, "chosen"
    where = "was imported" if "imported_from" in _record(source) else "has no agent any more"
    name = f" {source.agent_name!r}" if source.agent_name else ""
    raise NeedsAgent(
        f"run {source.pk} {where}: its agent{name} is not configured here, and its snapshot is "
        "a record, never a configuration. It can go live only with the models, tools, "
        "approvals and limits of an agent configured here: choose one.")


def _record(source: Run) -> dict[str, Any]:
    snap = source.agent_snapshot
    return snap if isinstance(snap, dict) else {}


def bind(source: Run, *, recorded: bool, chosen: int | None = None) -> dict[str, Any]:
    """Today's snapshot of the bound agent; with `recorded`, the record's behaviour over it
    (runs.snapshot.RECORDED_FIELDS). `bound` in it says to whom and what came from where."""
    agent, how = bound_agent(source, chosen)
    record = {"paradigm": source.paradigm, **_record(source)}
    try:
        snap = snapshot(agent, recorded=record if recorded else None)
    except ValueError as exc:  # a forged record, or a member agent deleted since
        raise ForkError(f"run {source.pk} cannot go live with agent {agent.name!r}: {exc}") \
            from None
    snap["bound"] = {"agent_id": agent.pk, "agent": agent.name, "how": how,
                     "recorded": list(RECORDED_FIELDS) if recorded else []}
    return snap


def _new_run(source: Run, user: Any, snap: dict[str, Any], fork_seq: int | None) -> Run:
    """The new run, claimed by this process at once: it counts towards the user's runs going
    (tasks.ensure_room), like any run the browser starts."""
    try:
        with transaction.atomic():
            tasks.ensure_room(user)
            return Run.objects.create(
                user=user, agent_id=snap["agent_id"], agent_name=snap["name"],
                paradigm=snap["paradigm"], agent_snapshot=snap, input=source.input,
                history=source.history, parent_run=source, fork_seq=fork_seq,
                worker=worker_id())
    except tasks.RunLimit as exc:
        raise ForkError(str(exc)) from None


def plan_replay(source: Run, user: Any, *, tools: Literal["live", "recorded"] = "recorded",
                agent: Literal["current", "recorded"] = "current",
                chosen: int | None = None) -> ReplayPlan:
    """A replay of `source`: every recorded reply served, checked against the new requests.
    Both modes run with today's configuration of the bound agent (bound_agent); `agent=
    "current"` also takes its prompt and params from today (to see what a change does),
    `"recorded"` keeps the record's."""
    if tools not in ("live", "recorded") or agent not in ("current", "recorded"):
        raise ForkError(f"unknown replay option tools={tools!r}, agent={agent!r}")
    snap = {**bind(source, recorded=agent == "recorded", chosen=chosen),
            "replay_of": source.pk, "replay": {"tools": tools, "agent": agent}}
    steps = list(source.steps.all())
    tool_rec = ToolRecording(recorded_tools(steps), approvals=recorded_approvals(steps)) \
        if tools == "recorded" else None
    return ReplayPlan(_new_run(source, user, snap, None), Recording(recorded_calls(steps)),
                      tool_rec)


def plan_fork(source: Run, user: Any, seq: int, *, edited_observation: str | None = None,
              edited_reply: Mapping[str, Any] | None = None, resume: bool = False,
              chosen: int | None = None) -> ReplayPlan:
    """A fork of `source` at step `seq`: steps 1..seq re-recorded from the record (that step's
    observation or reply replaced when edited), live from there, with today's configuration
    of the bound agent and the record's prompt and params."""
    steps = list(source.steps.all())
    step = next((s for s in steps if s.seq == seq), None)
    if step is None:
        raise ForkError(f"run {source.pk} has no step {seq}")
    if edited_observation is not None and step.kind != "tool":
        raise ForkError(f"step {seq} is a {step.kind} step; only a tool step has an observation")
    if edited_reply is not None and step.kind != "llm":
        raise ForkError(f"step {seq} is a {step.kind} step; only an llm step has a reply")
    edited = "observation" if edited_observation is not None else (
        "reply" if edited_reply is not None else None)
    snap = {**bind(source, recorded=True, chosen=chosen),
            "fork": {"of": source.pk, "seq": seq, "edited": edited, "resume": resume}}
    recording = Recording(recorded_calls(steps), fork_at=seq, edited_reply=edited_reply)
    tools = ToolRecording(recorded_tools(steps), fork_at=seq,
                          edited_observation=edited_observation,
                          approvals=recorded_approvals(steps))
    return ReplayPlan(_new_run(source, user, snap, seq), recording, tools)


def plan_resume(source: Run, user: Any, *, chosen: int | None = None) -> ReplayPlan:
    """An unfinished run continued: a fork at its last step."""
    if not source.is_resumable:
        raise ForkError(f"run {source.pk} is {source.get_status_display()}; only an "
                        "interrupted, cancelled, timed-out, stopped or failed run can be resumed")
    last = source.steps.order_by("-seq").values_list("seq", flat=True).first()
    if last is None:
        raise ForkError(f"run {source.pk} has no steps to resume from; run it again instead")
    return plan_fork(source, user, last, resume=True, chosen=chosen)


# ------------------------------------------------------------------ launching


def start(plan: ReplayPlan) -> Run:
    """Launch the planned run as a task of the running loop (call from async code), under a
    RunControl like any live run: its page can pause it, and a call that needs approval and
    is not served from the record waits for a person there."""
    live.start(plan.run, prepare=plan.prepare)
    return plan.run


async def replay_run(source: Run, user: Any, **options: Any) -> Run:
    return start(await sync_to_async(plan_replay)(source, user, **options))


async def fork_run(source: Run, user: Any, seq: int, **edits: Any) -> Run:
    return start(await sync_to_async(plan_fork)(source, user, seq, **edits))


async def resume_run(source: Run, user: Any, **options: Any) -> Run:
    return start(await sync_to_async(plan_resume)(source, user, **options))
