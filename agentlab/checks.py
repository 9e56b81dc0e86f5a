"""System checks: misconfiguration fails loudly, with ids (agentlab.W001, W002, W003, E001,
E002)."""

from __future__ import annotations

import os
from typing import Any

from django.core.checks import CheckMessage, Error, Warning, register
from django.db import DatabaseError


@register()
def check_profile_keys(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """agentlab.W001: a profile names an API-key variable that is not set."""
    from agentlab.models import ModelProfile

    try:
        profiles = list(ModelProfile.objects.exclude(api_key_env=""))
    except DatabaseError:  # not migrated yet: nothing to check
        return []
    return [
        Warning(
            f"Model profile '{p.name}' reads its API key from ${p.api_key_env}, which is not set.",
            hint=f"export {p.api_key_env}=... before starting Agent Lab, or clear the field "
            "for endpoints that need no key.",
            obj=p,
            id="agentlab.W001",
        )
        for p in profiles
        if not os.environ.get(p.api_key_env)
    ]


@register()
def check_key_variables(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """agentlab.W003: a profile or an MCP server names a key variable the operator's list
    (AGENTLAB_KEY_VARIABLES) no longer allows: its requests are refused until it is fixed."""
    from django.utils.text import capfirst

    from agentlab.llm.keys import key_variable_problem
    from agentlab.models import McpServer, ModelProfile

    try:
        named = [(p, p.api_key_env) for p in ModelProfile.objects.exclude(api_key_env="")]
        named += [(m, m.header_env) for m in McpServer.objects.exclude(header_env="")]
    except DatabaseError:  # not migrated yet: nothing to check
        return []
    return [Warning(f"{capfirst(type(row)._meta.verbose_name)} '{row}': {problem}.",
                    hint="Add the variable to AGENTLAB_KEY_VARIABLES, or name another one "
                    "(a superuser, in the admin).", obj=row, id="agentlab.W003")
            for row, name in named if (problem := key_variable_problem(name))]


@register()
def check_tools_and_agents(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """agentlab.E001: unknown paradigm; agentlab.E002: tool row without an implementation
    (agentlab.W002 when only agents defined in code use it)."""
    from agentlab.models import Agent, Tool
    from agentlab.paradigms.registry import paradigm_keys
    from agentlab.tools.registry import all_tools

    try:
        agents = list(Agent.objects.only("pk", "name", "paradigm"))
        tools = list(Tool.objects.filter(mcp_server=None).only("pk", "name"))
    except DatabaseError:
        return []
    known, registry = set(paradigm_keys()), all_tools()
    messages: list[CheckMessage] = [
        Error(
            f"Agent '{a.name}' uses the unknown paradigm '{a.paradigm}'.",
            hint=f"Known paradigms: {', '.join(sorted(known))}.",
            obj=a,
            id="agentlab.E001",
        )
        for a in agents
        if a.paradigm not in known
    ]
    missing = [t for t in tools if t.name not in registry]
    # A tool that only agents defined in code use may be one of a script's own @tool functions
    # (agentlab.code_agents): this process never imported it. A warning, not an error that
    # would stop `serve` and `migrate`.
    defined_in_code: dict[int, set[bool]] = {}
    for tool_id, ref in Agent.tools.through.objects.filter(tool__in=missing).values_list(
            "tool_id", "agent__code_ref"):
        defined_in_code.setdefault(tool_id, set()).add(bool(ref))
    code_only = {pk for pk, kinds in defined_in_code.items() if kinds == {True}}
    messages += [
        Warning(
            f"Tool row '{t.name}' has no implementation in this process; only agents defined "
            "in code use it.",
            hint="Declare those agents and their @tool functions in an installed app's "
            "agents.py, so that every process imports them.",
            obj=t,
            id="agentlab.W002",
        ) if t.pk in code_only else
        Error(
            f"Tool row '{t.name}' has no registered implementation.",
            hint="Delete the row in the admin, or restore the @tool function of that name.",
            obj=t,
            id="agentlab.E002",
        )
        for t in missing
    ]
    return messages
