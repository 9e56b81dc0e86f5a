"""Replay, fork and resume: a new Run that re-executes a recorded one (DESIGN.md "Replay, fork,
diff").

This module is the web process's half: it checks the request, binds the new run to today's
configuration and creates it, with what it re-executes written into its own row (agentlab/forks/
record.py reads it back). The run is then submitted like any other (agentlab.runs.engine): it
executes in this process (the embedded default) or on a worker (the scale profile), and there
its plan is rebuilt from the database (record.plan_for). Replay serves everything; a fork at
step k serves steps 1..k (k's output edited if the user says so) and goes live after.

The source's snapshot is a record (of an old run, or of an imported bundle): it is read, never
run. The new run binds to today's configuration (`bind`): the source's agent row, else the agent
of the same name, else one the user chose; its models, tools, policies and limits are today's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from asgiref.sync import sync_to_async

from agentlab.forks.record import ForkError, ReplayPlan, plan_for
from agentlab.models import Agent
from agentlab.runs import engine, start
from agentlab.runs.snapshot import RECORDED_FIELDS, snapshot
from traces.models import Run

__all__ = ["ForkError", "NeedsAgent", "ReplayPlan", "bind", "bound_agent", "create_fork",
           "create_replay", "create_resume", "fork_run", "plan_fork", "plan_replay",
           "plan_resume", "replay_run", "resume_run"]


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
    (runs.start), like any run the browser starts. Its question is the source's, read again by
    today's guardrails (runs.start: a re-sent question is checked like a new one)."""
    history = source.history if isinstance(source.history, list) else []
    try:
        return start.start_run(user, snap, source.input or "", history=history,
                               parent_run=source, fork_seq=fork_seq, claim=True)
    except start.RunLimit as exc:
        raise ForkError(str(exc)) from None


def create_replay(source: Run, user: Any, *,
                  tools: Literal["live", "recorded"] = "recorded",
                  agent: Literal["current", "recorded"] = "current",
                  chosen: int | None = None) -> Run:
    """A replay of `source`: every recorded reply served, checked against the new requests.
    Both modes run with today's configuration of the bound agent (bound_agent); `agent=
    "current"` also takes its prompt and params from today (to see what a change does),
    `"recorded"` keeps the record's."""
    if tools not in ("live", "recorded") or agent not in ("current", "recorded"):
        raise ForkError(f"unknown replay option tools={tools!r}, agent={agent!r}")
    snap = {**bind(source, recorded=agent == "recorded", chosen=chosen),
            "replay_of": source.pk, "replay": {"tools": tools, "agent": agent}}
    return _new_run(source, user, snap, None)


def create_fork(source: Run, user: Any, seq: int, *, edited_observation: str | None = None,
                edited_reply: Mapping[str, Any] | None = None, resume: bool = False,
                chosen: int | None = None) -> Run:
    """A fork of `source` at step `seq`: steps 1..seq re-recorded from the record (that step's
    observation or reply replaced when edited, the edit kept in the new run's snapshot as
    `fork_edit`), live from there, with today's configuration of the bound agent and the
    record's prompt and params."""
    step = source.steps.filter(seq=seq).only("kind").first()
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
    if edited_observation is not None:
        snap["fork_edit"] = {"observation": edited_observation}
    elif edited_reply is not None:
        snap["fork_edit"] = {"reply": dict(edited_reply)}
    return _new_run(source, user, snap, seq)


def create_resume(source: Run, user: Any, *, chosen: int | None = None) -> Run:
    """An unfinished run continued: a fork at its last step."""
    if not source.is_resumable:
        raise ForkError(f"run {source.pk} is {source.get_status_display()}; only an "
                        "interrupted, cancelled, timed-out, stopped or failed run can be resumed")
    last = source.steps.order_by("-seq").values_list("seq", flat=True).first()
    if last is None:
        raise ForkError(f"run {source.pk} has no steps to resume from; run it again instead")
    return create_fork(source, user, last, resume=True, chosen=chosen)


# ------------------------------------------------------------------ the plans, for callers that
# execute the new run themselves (tests, commands): rebuilt from the database, as where it runs


def _planned(run: Run) -> ReplayPlan:
    plan = plan_for(run)
    assert plan is not None  # the run was just created to follow a record
    return plan


def plan_replay(source: Run, user: Any, **options: Any) -> ReplayPlan:
    return _planned(create_replay(source, user, **options))


def plan_fork(source: Run, user: Any, seq: int, **edits: Any) -> ReplayPlan:
    return _planned(create_fork(source, user, seq, **edits))


def plan_resume(source: Run, user: Any, **options: Any) -> ReplayPlan:
    return _planned(create_resume(source, user, **options))


# ------------------------------------------------------------------ launching


async def _submit(run: Run) -> Run:
    """Have the new run executed like any other (agentlab.runs.engine): in this process under
    a RunControl, or by a worker, which rebuilds its plan from the database. Its page can pause
    it, and a call that needs approval and is not served from the record waits for a person
    there."""
    await engine.submit(run)
    return run


async def replay_run(source: Run, user: Any, **options: Any) -> Run:
    return await _submit(await sync_to_async(create_replay)(source, user, **options))


async def fork_run(source: Run, user: Any, seq: int, **edits: Any) -> Run:
    return await _submit(await sync_to_async(create_fork)(source, user, seq, **edits))


async def resume_run(source: Run, user: Any, **options: Any) -> Run:
    return await _submit(await sync_to_async(create_resume)(source, user, **options))
