"""An @agent declaration, pure: what the decorated function says about the agent (name,
paradigm, system message, user message template, return type, tools, model, memory, limits,
where it is defined), and the registry of this process's declarations. No ORM here: the rows
are `rows.py`, calling is `calls.py`."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

from agentlab.code_agents.output import OutputType, output_type
from agentlab.paths import REPO_ROOT
from agentlab.tools.decorator import ToolSpec
from agentlab.tools.registry import register_tool

EMBEDDED = "embedded"  # model="embedded": the embedded profile (agentlab.defaults)
LIMITS = ("max_steps", "max_llm_calls", "total_timeout_s", "tool_timeout_s", "token_budget")


@dataclass(frozen=True, kw_only=True)
class Declaration:
    name: str
    paradigm: str
    system: str
    description: str
    signature: inspect.Signature
    template: str | None
    output: OutputType
    tools: tuple[str, ...]
    model: str
    memory: int
    retries: int
    params: Mapping[str, Any]
    limits: Mapping[str, Any]
    code_ref: str
    demo_question: str = ""
    fn: Callable[..., Any] | None = field(default=None, compare=False, repr=False)

    @property
    def system_prompt(self) -> str:
        """The system message the row gets: the docstring (or `system=`), then what shape
        the answer must have."""
        return "\n\n".join(p for p in (self.system, self.output.instructions()) if p)

    def user_message(self, *args: Any, **kwargs: Any) -> str:
        """The call's arguments rendered into the user message (TypeError when they do not
        fit the signature, as calling the function would)."""
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = dict(bound.arguments)
        if self.template is not None:
            return self.template.format(**values)
        if len(values) == 1:
            return _text(next(iter(values.values())))
        return "\n".join(f"{name}: {_text(value)}" for name, value in values.items())


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=_plain)
    except (TypeError, ValueError):
        return str(value)


def _plain(value: Any) -> Any:
    from pydantic import TypeAdapter

    return TypeAdapter(type(value)).dump_python(value, mode="json")


def declare(fn: Callable[..., Any], *, name: str | None = None, paradigm: str = "react",
            system: str | None = None, description: str | None = None,
            template: str | None = None, tools: tuple[ToolSpec | str, ...] | list = (),
            model: str = EMBEDDED, memory: int = 0, retries: int = 2,
            params: Mapping[str, Any] | None = None, demo_question: str = "",
            **limits: Any) -> Declaration:
    """The declaration of `fn` (its body is never run: the agent answers instead)."""
    if unknown := set(limits) - set(LIMITS):
        raise TypeError(f"@agent got unknown options: {', '.join(sorted(unknown))} "
                        f"(limits are {', '.join(LIMITS)})")
    if memory < 0 or retries < 0:
        raise ValueError("@agent: memory and retries are counts, 0 or more")
    signature = inspect.signature(fn)
    if not signature.parameters:
        raise TypeError(f"@agent {fn.__qualname__}: the agent needs at least one parameter, "
                        "the user message")
    doc = inspect.getdoc(fn) or ""
    system_text = doc if system is None else system
    if not system_text.strip():
        raise TypeError(f"@agent {fn.__qualname__}: give the system message as the docstring "
                        "or system=…")
    hints = get_type_hints(fn)
    names = []
    for t in tools:
        if isinstance(t, ToolSpec):
            register_tool(t)
            names.append(t.name)
        elif isinstance(t, str):
            names.append(t)
        else:
            raise TypeError(f"@agent tools: {t!r} is neither an @tool function nor a tool name")
    return Declaration(
        name=name or fn.__name__, paradigm=paradigm, system=system_text.strip(),
        description=description or system_text.strip().split("\n\n")[0].replace("\n", " "),
        signature=signature.replace(return_annotation=inspect.Signature.empty),
        template=template, output=output_type(hints.get("return", str)), tools=tuple(names),
        model=model, memory=memory, retries=retries, params=dict(params or {}),
        limits=dict(limits), code_ref=code_ref(fn), demo_question=demo_question, fn=fn)


def code_ref(fn: Callable[..., Any]) -> str:
    """"path:line" of the function's definition, the path relative to the repository when it
    lies inside it (the same in every process, whatever its working directory)."""
    target = inspect.unwrap(fn)
    path = Path(inspect.getsourcefile(target) or inspect.getfile(target)).resolve()
    line = target.__code__.co_firstlineno
    try:
        shown = path.relative_to(REPO_ROOT)
    except ValueError:
        shown = path
    return f"{shown}:{line}"


# Every declaration of this process by agent name (imported agents.py modules put them here).
REGISTRY: dict[str, Declaration] = {}


def register(declaration: Declaration) -> None:
    """Add a declaration; another one already under its name is refused (ValueError), the
    same one declared again (a module imported twice) replaces it."""
    known = REGISTRY.get(declaration.name)
    if known is not None and known.code_ref != declaration.code_ref:
        raise ValueError(f"two agents are named {declaration.name!r}: {known.code_ref} and "
                         f"{declaration.code_ref}; give one of them name=…")
    REGISTRY[declaration.name] = declaration
