"""Snapshot -> RunContext: the models per role, the one tools executor, the limits.

Built from the snapshot alone, which `runs.snapshot` froze from today's rows when the run was
created (a fork, resume or replay binds anew: agentlab.forks.plans). An imported run's snapshot
is a record, never a configuration: it is refused here. The paradigm registry is handed to the
context for its sub-runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentlab.guardrails.checks import Check
from agentlab.llm.client import OpenAIChatModel
from agentlab.llm.types import ProfileConfig
from agentlab.paradigms import registry
from agentlab.profiles import model_for, resolve_url
from agentlab.runtime.context import RunContext
from agentlab.runtime.guard import RunGuard
from agentlab.runtime.limits import Limits
from agentlab.runtime.scopes import AgentSpec
from agentlab.tools.executor import ToolExecutor, ToolPolicy
from agentlab.tools.mcp import mcp_spec
from agentlab.tools.registry import all_tools


def profile_from_dict(data: dict[str, Any]) -> ProfileConfig:
    """The inverse of dataclasses.asdict, with the embedded model's current URL filled in."""
    fallback = data.get("fallback")
    chain = profile_from_dict(fallback) if fallback else None
    return resolve_url(ProfileConfig(**{**data, "fallback": chain}))


def build_context(snap: dict[str, Any], *, sink: Any, user_groups: Iterable[str] = (),
                  is_superuser: bool = False, history: list[dict] | None = None,
                  **hooks: Any) -> RunContext:
    """A RunContext from a snapshot: models per role, the tools executor, limits."""
    if "imported_from" in snap:  # its endpoints, key names, policies and limits are foreign
        raise ValueError("an imported run's snapshot is a record, not a configuration: fork, "
                         "resume or replay it to run it with an agent configured here")
    groups = list(user_groups)
    agents = {
        name: AgentSpec(name=name, paradigm=member["paradigm"], params=member["params"],
                        system_prompt=member["system_prompt"],
                        executor=executor_for(member["tools"], groups, is_superuser),
                        models=models_for(member))
        for name, member in snap.get("agents", {}).items()
    }
    limits = Limits(**{k: v for k, v in snap["limits"].items() if v is not None})
    return RunContext(
        models=models_for(snap),
        executor=executor_for(snap["tools"], groups, is_superuser),
        sink=sink,
        limits=limits,
        params=snap["params"],
        system_prompt=snap["system_prompt"],
        history=history or [],
        agents=agents,
        paradigms=registry,
        guard=guard_for(snap),
        **hooks,
    )


def guard_for(snap: dict[str, Any]) -> RunGuard | None:
    """The run's guardrails (None: it has none), each judge with a model of its own."""
    checks = [Check.from_dict(g) for g in snap.get("guardrails") or []]
    question = snap.get("guardrail_input")
    if not checks and not question:
        return None
    judges = {c.name: model_for(profile_from_dict(c.judge)) for c in checks
              if c.kind == "judge" and c.judge}
    return RunGuard(checks, judges=judges, question=question)


def executor_for(tools: dict[str, dict[str, Any]], user_groups: Iterable[str] = (),
                 is_superuser: bool = False) -> ToolExecutor:
    """The executor of a snapshot's tools (name -> policy as JSON) for a user with these
    groups; a tool without a registered implementation is left out (an MCP tool's is its
    snapshot entry: agentlab.tools.mcp)."""
    registry_ = all_tools()
    known = {name: registry_[name] for name in tools if name in registry_}
    known |= {name: mcp_spec(name, t["mcp"]) for name, t in tools.items()
              if isinstance(t.get("mcp"), dict) and name not in known}
    policies = {name: ToolPolicy(**{**{k: v for k, v in tools[name].items() if k != "mcp"},
                                    "allowed_groups": frozenset(tools[name]["allowed_groups"])})
                for name in known}
    return ToolExecutor(known, policies, user_groups=list(user_groups),
                        is_superuser=is_superuser)


def models_for(snap: dict[str, Any]) -> dict[str, OpenAIChatModel]:
    """The models per role, each sharing its endpoint's place in line with every other run's
    (agentlab/llm/gate.py)."""
    return {role: model_for(profile_from_dict(p)) for role, p in snap["profiles"].items()}
