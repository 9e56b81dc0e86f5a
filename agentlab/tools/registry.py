"""The tools by name: the built-in ones (imported lazily: the modules build demo data on first
use) and those registered by code (an @agent's own @tool functions: `register_tool`)."""

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


# Tools registered by code in this process (agentlab.code_agents), by name.
_REGISTERED: dict[str, ToolSpec] = {}


def register_tool(spec: ToolSpec) -> None:
    """Make a ToolSpec defined outside the built-in modules known by its name; a name that
    is already another tool's is refused (ValueError)."""
    known = builtin_tools().get(spec.name) or _REGISTERED.get(spec.name)
    if known is not None and known.fn is not spec.fn and _where(known) != _where(spec):
        raise ValueError(f"a tool named {spec.name!r} is already registered "
                         f"({_where(known)}); give this one another name")
    if spec.name not in builtin_tools():
        _REGISTERED[spec.name] = spec


def _where(spec: ToolSpec) -> str:
    return f"{spec.fn.__module__}.{spec.fn.__qualname__}"


def all_tools() -> dict[str, ToolSpec]:
    """The built-in tools and those registered by code."""
    return {**builtin_tools(), **_REGISTERED}


def get_tool(name: str) -> ToolSpec | None:
    return all_tools().get(name)
