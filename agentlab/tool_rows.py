"""Tool rows <-> the registry: sync on migrate, and a row -> its pure ToolPolicy (the
snapshot freezes it; agentlab.runs.build makes the one executor from it). Rows of MCP servers'
tools are made by `refresh_mcp` ("Refresh tools" in the admin) and frozen by `mcp_entry`."""

from __future__ import annotations

import dataclasses
from typing import Any

from asgiref.sync import async_to_sync
from django.utils import timezone

from agentlab.models import McpServer, Tool
from agentlab.tools.executor import ToolPolicy
from agentlab.tools.mcp import CATEGORY, McpServerConfig, list_tools, tool_name
from agentlab.tools.registry import all_tools


def sync_tools(**kwargs: Any) -> list[str]:
    """Create a row for every registered tool that has none (post_migrate); returns new names."""
    existing = set(Tool.objects.values_list("name", flat=True))
    new = []
    for name, spec in all_tools().items():
        if name in existing:
            Tool.objects.filter(name=name, mcp_server=None).update(category=spec.category,
                                                  side_effects=spec.side_effects)
            continue
        Tool.objects.create(
            name=name,
            category=spec.category,
            side_effects=spec.side_effects,
            # Tools that change the world wait for a person by default.
            needs_approval=spec.side_effects,
        )
        new.append(name)
    return new


def policy(row: Tool) -> ToolPolicy:
    return ToolPolicy(
        # A disabled MCP server disables its tools.
        enabled=row.enabled and (row.mcp_server_id is None or row.mcp_server.enabled),
        description=row.description or None,
        timeout_s=row.timeout_s,
        max_observation_chars=row.max_observation_chars,
        needs_approval=row.needs_approval,
        allowed_groups=frozenset(g.name for g in row.allowed_groups.all()),
    )



def mcp_config(server: McpServer) -> McpServerConfig:
    return McpServerConfig(
        name=server.name, transport=server.transport, command=server.command,
        args=tuple(server.args or ()), env_names=tuple(server.env_names or ()), url=server.url,
        header_name=server.header_name, header_env=server.header_env,
        timeout_s=server.timeout_s)


def refresh_mcp(server: McpServer) -> tuple[list[str], list[str]]:
    """List the server's tools and create or update their rows -> (created, updated) names.
    New side-effect tools wait for approval (as built-ins do) unless the server marks them
    read-only; the admin's later choices (enabled, timeout, groups, approval) are kept. Tools
    the server no longer lists are disabled, not deleted (runs still name them)."""
    listed = async_to_sync(list_tools)(mcp_config(server))
    created, updated, seen = [], [], set()
    for info in listed:
        name = tool_name(server.name, info.name)
        seen.add(name)
        values = {"mcp_server": server, "mcp_tool": info.name,
                  "mcp_description": info.description, "mcp_schema": info.parameters,
                  "category": CATEGORY, "side_effects": not info.read_only}
        row = Tool.objects.filter(name=name).first()
        if row is None:
            Tool.objects.create(name=name, needs_approval=not info.read_only, **values)
            created.append(name)
        elif row.mcp_server_id not in (None, server.pk):
            raise ValueError(f"{name} already belongs to the MCP server {row.mcp_server}")
        else:
            Tool.objects.filter(pk=row.pk).update(**values)
            updated.append(name)
    server.tools.exclude(name__in=seen).update(enabled=False)
    McpServer.objects.filter(pk=server.pk).update(refreshed=timezone.now())
    return created, updated


def mcp_entry(row: Tool) -> dict[str, Any]:
    """What a snapshot keeps of an MCP tool: the server's configuration (variable names,
    never values), the tool's name there, its description and schema."""
    server = row.mcp_server
    assert server is not None
    return {"server": dataclasses.asdict(mcp_config(server)), "tool": row.mcp_tool,
            "description": row.mcp_description, "parameters": row.mcp_schema or {},
            "side_effects": row.side_effects}
