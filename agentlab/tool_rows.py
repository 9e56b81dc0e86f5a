"""Tool rows <-> the registry: sync on migrate, and rows -> pure ToolPolicy/ToolExecutor."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentlab.models import Tool
from agentlab.tools.executor import ToolExecutor, ToolPolicy
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


def build_executor(rows: Iterable[Tool], user: Any = None) -> ToolExecutor:
    """An executor over the given rows' implementations, with this user's groups."""
    registry = builtin_tools()
    rows = [r for r in rows if r.name in registry]
    groups: list[str] = []
    superuser = False
    if user is not None and getattr(user, "is_authenticated", False):
        groups = list(user.groups.values_list("name", flat=True))
        superuser = user.is_superuser
    return ToolExecutor(
        {r.name: registry[r.name] for r in rows},
        {r.name: policy(r) for r in rows},
        user_groups=groups,
        is_superuser=superuser,
    )
