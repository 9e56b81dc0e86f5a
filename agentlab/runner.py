"""Agent rows -> runnable objects, and the asyncio tasks that run them (DESIGN.md "A run").

The run freezes a JSON snapshot of its agent at launch; everything that executes is built from
that snapshot, so later admin edits never rewrite history and a snapshot alone can run again.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async

from agentlab.llm.client import OpenAIChatModel
from agentlab.llm.types import ProfileConfig
from agentlab.models import Agent
from agentlab.paradigms import slots
from agentlab.paradigms.base import (
    AgentSpec,
    Limits,
    RunContext,
    RunOutcome,
    execute,
    get_paradigm,
    validate_params,
)
from agentlab.paradigms.sinks import TeeSink
from agentlab.profiles import resolve_url, to_config
from agentlab.tool_rows import policy
from agentlab.tools.executor import ToolExecutor, ToolPolicy
from agentlab.tools.registry import builtin_tools
from traces.models import Run
from traces.recorder import Recorder

LIMIT_FIELDS = ("max_steps", "max_llm_calls", "total_timeout_s", "tool_timeout_s", "token_budget")


def snapshot(agent: Agent, *, _seen: frozenset[int] = frozenset()) -> dict[str, Any]:
    """Everything needed to run `agent` again, as JSON (key *variable names* only, never keys).
    A Multi-Agent's members that name configured agents are frozen inside it, under "agents"."""
    default = to_config(agent.model_profile, resolve_local=False)
    profiles = {"default": dataclasses.asdict(default)}
    for rp in agent.role_profiles.select_related("profile"):
        profiles[rp.role] = dataclasses.asdict(to_config(rp.profile, resolve_local=False))
    tools = {}
    for row in agent.tools.prefetch_related("allowed_groups"):
        p = dataclasses.asdict(policy(row))
        p["allowed_groups"] = sorted(p["allowed_groups"])
        tools[row.name] = p
    return {
        "agent_id": agent.pk,
        "name": agent.name,
        "paradigm": agent.paradigm,
        "system_prompt": agent.system_prompt,
        "params": validate_params(agent.paradigm, agent.params or {}),
        "limits": {f: getattr(agent, f) for f in LIMIT_FIELDS},
        "profiles": profiles,
        "tools": tools,
        "agents": _member_snapshots(agent, _seen | {agent.pk}),
    }


def _member_snapshots(agent: Agent, seen: frozenset[int]) -> dict[str, Any]:
    names = {m.get("agent") for m in (agent.params or {}).get("members", [])
             if isinstance(m, dict) and m.get("agent")}
    members = {}
    for member in Agent.objects.filter(name__in=names):
        if member.pk in seen:
            raise ValueError(f"agent {agent.name!r}: member {member.name!r} contains itself")
        members[member.name] = snapshot(member, _seen=seen)
    if missing := names - set(members):
        raise ValueError(f"agent {agent.name!r}: no agent named {', '.join(sorted(missing))}")
    return members


def profile_from_dict(data: dict[str, Any]) -> ProfileConfig:
    """The inverse of dataclasses.asdict, with the embedded model's current URL filled in."""
    fallback = data.get("fallback")
    chain = profile_from_dict(fallback) if fallback else None
    return resolve_url(ProfileConfig(**{**data, "fallback": chain}))


def build_context(snap: dict[str, Any], *, sink: Any, user_groups: list[str] | None = None,
                  is_superuser: bool = False, history: list[dict] | None = None,
                  **hooks: Any) -> RunContext:
    """A RunContext from a snapshot: models per role, the tools executor, limits."""
    executor = _executor(snap, user_groups or [], is_superuser)
    models = _models(snap)
    agents = {
        name: AgentSpec(name=name, paradigm=member["paradigm"], params=member["params"],
                        system_prompt=member["system_prompt"],
                        executor=_executor(member, user_groups or [], is_superuser),
                        models=_models(member))
        for name, member in snap.get("agents", {}).items()
    }
    limits = Limits(**{k: v for k, v in snap["limits"].items() if v is not None})
    return RunContext(
        models=models,
        executor=executor,
        sink=sink,
        limits=limits,
        params=snap["params"],
        system_prompt=snap["system_prompt"],
        history=history or [],
        agents=agents,
        **hooks,
    )


def _executor(snap: dict[str, Any], user_groups: list[str], is_superuser: bool) -> ToolExecutor:
    registry = builtin_tools()
    tools = {name: registry[name] for name in snap["tools"] if name in registry}
    policies = {
        name: ToolPolicy(**{**p, "allowed_groups": frozenset(p["allowed_groups"])})
        for name, p in snap["tools"].items()
        if name in tools
    }
    return ToolExecutor(tools, policies, user_groups=user_groups, is_superuser=is_superuser)


def _models(snap: dict[str, Any]) -> dict[str, OpenAIChatModel]:
    return {role: OpenAIChatModel(profile_from_dict(p)) for role, p in snap["profiles"].items()}


def create_run(agent: Agent, user: Any, question: str, *, history: list[dict] | None = None,
               timeout_cap_s: int | None = None, **fields: Any) -> Run:
    """A queued run of `agent`; `timeout_cap_s` lowers its total timeout (never raises it)."""
    snap = snapshot(agent)
    if timeout_cap_s:
        own = snap["limits"].get("total_timeout_s")
        snap["limits"]["total_timeout_s"] = min(own, timeout_cap_s) if own else timeout_cap_s
    return Run.objects.create(
        user=user, agent=agent, agent_name=agent.name, paradigm=agent.paradigm,
        agent_snapshot=snap, input=question, history=history or [], **fields,
    )


async def execute_run(run: Run, *, watchers: tuple[Any, ...] = (),
                      prepare: Callable[[RunContext], None] | None = None,
                      **hooks: Any) -> RunOutcome:
    """Run a recorded Run to its end in this task; every step is persisted, then published
    (and then shown to `watchers`, extra sinks such as the terminal). `prepare` may rewire the
    built context before it runs (replay and forks wrap its models, tools and sink)."""
    user = await sync_to_async(lambda: run.user)()
    groups = await sync_to_async(lambda: list(user.groups.values_list("name", flat=True)))()
    # A finished step's row is waited for only while other runs wait for the CPU.
    recorder = Recorder(run.pk, ahead=slots.free)
    sink = TeeSink(recorder, *watchers) if watchers else recorder
    ctx = build_context(run.agent_snapshot, sink=sink, user_groups=groups,
                        is_superuser=user.is_superuser, history=run.history, **hooks)
    if prepare is not None:
        prepare(ctx)
    paradigm = get_paradigm(run.paradigm)()
    RUNNING[run.pk] = ctx
    try:
        async with slots.computing():  # a few runs compute at once; see paradigms/slots.py
            return await execute(paradigm, ctx, run.input)
    finally:
        RUNNING.pop(run.pk, None)


# Runs being executed by this process: run id -> its context (for cancel / pause / approvals).
RUNNING: dict[int, RunContext] = {}
TASKS: dict[int, asyncio.Task[RunOutcome]] = {}


def launch(run: Run, **hooks: Any) -> asyncio.Task[RunOutcome]:
    """Start `run` as an asyncio task of this process's loop; consumers only forward to it."""
    task = asyncio.get_running_loop().create_task(execute_run(run, **hooks), name=f"run-{run.pk}")
    TASKS[run.pk] = task
    task.add_done_callback(lambda _t: TASKS.pop(run.pk, None))
    return task


def cancel(run_id: int) -> bool:
    ctx = RUNNING.get(run_id)
    if ctx is None:
        return False
    ctx.cancel()
    return True
