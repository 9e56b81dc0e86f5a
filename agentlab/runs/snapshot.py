"""Agent row -> JSON snapshot -> queued Run. The run freezes its agent at launch, so later
admin edits never rewrite history and a snapshot alone can run again (agentlab.runs.build)."""

from __future__ import annotations

import dataclasses
from typing import Any

from agentlab.models import Agent
from agentlab.paradigms.registry import validate_params
from agentlab.profiles import to_config
from agentlab.tool_rows import policy
from traces.models import Run

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
