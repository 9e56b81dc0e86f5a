"""Tool rows <-> the registry: sync on migrate, and a row -> its pure ToolPolicy (the
snapshot freezes it; agentlab.runs.build makes the one executor from it)."""

from __future__ import annotations

from typing import Any

from agentlab.models import Tool
from agentlab.tools.executor import ToolPolicy
from agentlab.tools.registry import builtin_tools


def sync_tools(**kwargs: Any) -> list[str]:
    """Create a row for every registered tool that has none (post_migrate); returns new names."""
    existing = set(Tool.objects.values_list("name", flat=True))
    new = []
    for name, spec in builtin_tools().items():
        if name in existing:
            Tool.objects.filter(name=name).update(category=spec.category,
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
        enabled=row.enabled,
        description=row.description or None,
        timeout_s=row.timeout_s,
        max_observation_chars=row.max_observation_chars,
        needs_approval=row.needs_approval,
        allowed_groups=frozenset(g.name for g in row.allowed_groups.all()),
    )

