"""Agent row -> JSON snapshot -> queued Run. The run freezes its agent at launch, so later
admin edits never rewrite history; a snapshot is then a record, and going live again (a fork,
a resume, a replay) binds anew to today's rows (`snapshot(agent, recorded=...)`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from agentlab.guardrail_rows import guardrails_of
from agentlab.guardrails.checks import Check
from agentlab.guardrails.decisions import check_question
from agentlab.models import Agent
from agentlab.paradigms.registry import get_paradigm, validate_params
from agentlab.profiles import to_config
from agentlab.tool_rows import mcp_entry, policy
from traces.models import Run

LIMIT_FIELDS = ("max_steps", "max_llm_calls", "total_timeout_s", "tool_timeout_s", "token_budget")
# What a record may still decide when it goes live again: how the agent behaves, never what
# it may reach or spend (endpoints, keys, tools' policies, limits come from today's rows).
RECORDED_FIELDS = ("paradigm", "system_prompt", "params", "tools offered")
MAX_PROMPT_CHARS = 100_000  # a recorded system prompt longer than this is refused


class BindError(ValueError):
    """A record that cannot be bound to today's configuration; the message says why."""


def snapshot(agent: Agent, *, recorded: Mapping[str, Any] | None = None,
             _seen: frozenset[int] = frozenset()) -> dict[str, Any]:
    """Everything needed to run `agent` as configured today, as JSON (key *variable names*
    only, never keys). A Multi-Agent's members that name configured agents are frozen inside
    it, under "agents".

    With `recorded` (an old or imported run's snapshot), the record's behaviour — paradigm,
    system prompt, paradigm params (validated) and which of today's tools it offers — over
    today's authority: profiles, tools and their policies, limits and members' authority are
    always today's rows of `agent` (and of the members' agents)."""
    behaviour = _today(agent) if recorded is None else recorded_behaviour(recorded)
    default = to_config(agent.model_profile, resolve_local=False)
    profiles = {"default": dataclasses.asdict(default)}
    for rp in agent.role_profiles.select_related("profile"):
        profiles[rp.role] = dataclasses.asdict(to_config(rp.profile, resolve_local=False))
    offered = _offered(recorded) if recorded is not None else None
    tools = {}
    for row in agent.tools.prefetch_related("allowed_groups").select_related("mcp_server"):
        if offered is not None and row.name not in offered:
            continue
        p = dataclasses.asdict(policy(row))
        p["allowed_groups"] = sorted(p["allowed_groups"])
        if row.mcp_server_id is not None:
            p["mcp"] = mcp_entry(row)
        tools[row.name] = p
    members = recorded.get("agents") if recorded is not None else None
    return {
        "agent_id": agent.pk,
        "name": agent.name,
        **behaviour,
        "limits": {f: getattr(agent, f) for f in LIMIT_FIELDS},
        "profiles": profiles,
        "tools": tools,
        "guardrails": guardrails_of(agent),
        "agents": _member_snapshots(agent, behaviour["params"], _seen | {agent.pk},
                                    members if isinstance(members, Mapping) else None),
    }


def _today(agent: Agent) -> dict[str, Any]:
    return {"paradigm": agent.paradigm, "system_prompt": agent.system_prompt,
            "params": validate_params(agent.paradigm, agent.params or {})}


def recorded_behaviour(recorded: Mapping[str, Any]) -> dict[str, Any]:
    """The paradigm, system prompt and params a record keeps, each checked as the admin
    checks an agent's (a forged bundle may hold anything)."""
    paradigm = recorded.get("paradigm")
    if not isinstance(paradigm, str) or not paradigm:
        raise BindError("the record names no paradigm")
    try:
        get_paradigm(paradigm)
    except KeyError as exc:
        raise BindError(f"the record's paradigm cannot run here: {exc.args[0]}") from None
    prompt = recorded.get("system_prompt") or ""
    if not isinstance(prompt, str):
        raise BindError("the record's system prompt is not text")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise BindError(f"the record's system prompt is {len(prompt):,} characters, over the "
                        f"limit of {MAX_PROMPT_CHARS:,}")
    params = recorded.get("params") or {}
    if not isinstance(params, dict):
        raise BindError("the record's paradigm parameters are not a JSON object")
    try:
        params = validate_params(paradigm, params)
    except ValueError as exc:
        raise BindError(f"the record's {exc}") from None
    return {"paradigm": paradigm, "system_prompt": prompt, "params": params}


def _offered(recorded: Mapping[str, Any]) -> set[str] | None:
    """The tool names the record offered (None: it does not say, so today's all)."""
    tools = recorded.get("tools")
    return {name for name in tools if isinstance(name, str)} if isinstance(tools, dict) else None


def _member_snapshots(agent: Agent, params: dict[str, Any], seen: frozenset[int],
                      recorded: Mapping[str, Any] | None) -> dict[str, Any]:
    names = {m.get("agent") for m in params.get("members", [])
             if isinstance(m, dict) and m.get("agent")}
    members = {}
    for member in Agent.objects.filter(name__in=names):
        if member.pk in seen:
            raise ValueError(f"agent {agent.name!r}: member {member.name!r} contains itself")
        own = recorded.get(member.name) if recorded is not None else None
        members[member.name] = snapshot(
            member, recorded=own if isinstance(own, Mapping) else None, _seen=seen)
    if missing := names - set(members):
        raise ValueError(f"agent {agent.name!r}: no agent named {', '.join(sorted(missing))}")
    return members


def create_run(agent: Agent, user: Any, question: str, *, history: list[dict] | None = None,
               timeout_cap_s: int | None = None, **fields: Any) -> Run:
    """A queued run of `agent`; `timeout_cap_s` lowers its total timeout (never raises it).
    The input guardrails read the question first: the run stores it as they left it (what
    they redacted or blocked masked) and records their decisions when it starts."""
    snap = snapshot(agent)
    if timeout_cap_s:
        own = snap["limits"].get("total_timeout_s")
        snap["limits"]["total_timeout_s"] = min(own, timeout_cap_s) if own else timeout_cap_s
    return queued_run(snap, user, question, history=history, **fields)


def queued_run(snap: dict[str, Any], user: Any, question: str, *,
               history: list[dict] | None = None, **fields: Any) -> Run:
    """A queued run of the frozen agent `snap` (today's, or a fork's bound snapshot): the
    input guardrails read the question first, a new one or a recorded one sent again."""
    question, history = checked_question(snap, question, history or [])
    return Run.objects.create(
        user=user, agent_id=snap["agent_id"], agent_name=snap["name"],
        paradigm=snap["paradigm"], agent_snapshot=snap, input=question, history=history,
        **fields)


def checked_question(snap: dict[str, Any], question: str,
                     history: list[Any]) -> tuple[str, list[Any]]:
    """The question and history as the guardrails of `snap` leave them (what they redacted
    or blocked masked), their decisions kept in `snap["guardrail_input"]` for the run to
    record when it starts (an input block then ends it before any model call). Every run
    that sends a question goes through here: a new one, and a fork, resume or replay that
    re-sends a recorded question (agentlab.forks.plans)."""
    question, decided = check_question(
        question, [Check.from_dict(g) for g in snap.get("guardrails") or []], history)
    history = decided.pop("history")
    if decided["decisions"]:
        snap["guardrail_input"] = decided
    else:
        snap.pop("guardrail_input", None)
    return question, history
