"""The built-in tools by name (imported lazily: the modules build demo data on first use)."""

from __future__ import annotations

import importlib
from functools import cache

from agentlab.tools.decorator import ToolSpec

BUILTIN_MODULES = [
    "agentlab.tools.builtin.basics",
    "agentlab.tools.builtin.weather",
    "agentlab.tools.builtin.business_db",
    "agentlab.tools.builtin.erp",
    "agentlab.tools.builtin.knowledge",
    "agentlab.tools.builtin.code_review",
]


@cache
def builtin_tools() -> dict[str, ToolSpec]:
    """Every ToolSpec defined at module level in the built-in modules that exist."""
    found: dict[str, ToolSpec] = {}
    for path in BUILTIN_MODULES:
        try:
            module = importlib.import_module(path)
        except ModuleNotFoundError as exc:
            if exc.name != path:
                raise
            continue
        for value in vars(module).values():
            if isinstance(value, ToolSpec):
                found[value.name] = value
    return found


def get_tool(name: str) -> ToolSpec | None:
    return builtin_tools().get(name)
