"""`@tool`: a typed Python function becomes a ToolSpec (name, description, JSON Schema)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, overload

from agentlab.tools.schema import docstring_parts, parameters_schema


@dataclass(frozen=True, kw_only=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any]
    is_async: bool
    side_effects: bool = False
    category: str = "general"

    def openai_schema(self, description: str | None = None) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": description or self.description,
                         "parameters": self.parameters},
        }


@overload
def tool(fn: Callable[..., Any]) -> ToolSpec: ...
@overload
def tool(*, name: str | None = None, description: str | None = None,
         side_effects: bool = False, category: str = "general"
         ) -> Callable[[Callable[..., Any]], ToolSpec]: ...


def tool(fn: Callable[..., Any] | None = None, *, name: str | None = None,
         description: str | None = None, side_effects: bool = False,
         category: str = "general") -> Any:
    """Turn a (sync or async) typed function into a ToolSpec; bare or with options."""

    def build(f: Callable[..., Any]) -> ToolSpec:
        summary, _ = docstring_parts(f)
        return ToolSpec(
            name=name or f.__name__,
            description=description or summary or f.__name__.replace("_", " "),
            parameters=parameters_schema(f),
            fn=f,
            is_async=inspect.iscoroutinefunction(f),
            side_effects=side_effects,
            category=category,
        )

    return build(fn) if fn is not None else build
