"""Python type hints -> JSON Schema (OpenAI function-calling parameters)."""

from __future__ import annotations

import enum
import inspect
import re
import types
import typing
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Annotated, Any, Literal, Union, get_args, get_origin

# For Annotated[str, "what it is", NOT_EMPTY]: a required text the model may not leave empty.
NOT_EMPTY: dict[str, Any] = {"minLength": 1}

_SIMPLE: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    dict: {"type": "object"},
    list: {"type": "array"},
    Any: {},
}


def type_schema(hint: Any) -> dict[str, Any]:
    """The JSON Schema of one annotation (descriptions from Annotated[..., "text"])."""
    origin, args = get_origin(hint), get_args(hint)
    if origin is Annotated:
        # Annotated[str, "what it is", {"minLength": 1}]: a description, and JSON Schema
        # keywords the model's reply is held to (a server that constrains its output to the
        # schema cannot send an empty city).
        schema = type_schema(args[0])
        texts = [a for a in args[1:] if isinstance(a, str)]
        for extra in (a for a in args[1:] if isinstance(a, dict)):
            schema.update(extra)
        return {**schema, "description": texts[0]} if texts else schema
    if hint in _SIMPLE:
        return dict(_SIMPLE[hint])
    if origin is Literal:
        schema: dict[str, Any] = {"enum": list(args)}
        kinds = {type(a) for a in args}
        if len(kinds) == 1 and (k := kinds.pop()) in _SIMPLE:
            schema = {**_SIMPLE[k], **schema}
        return schema
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        values = [m.value for m in hint]
        return {**type_schema(type(values[0])), "enum": values} if values else {}
    if origin in (list, tuple, set, frozenset, Sequence):
        return {"type": "array", "items": type_schema(args[0])} if args else {"type": "array"}
    if origin is dict:
        return {"type": "object"}
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return type_schema(rest[0])
        return {"anyOf": [type_schema(a) for a in rest]}
    raise TypeError(f"no JSON Schema for the type hint {hint!r}")


def _is_optional(hint: Any) -> bool:
    if get_origin(hint) is Annotated:
        hint = get_args(hint)[0]
    return get_origin(hint) in (Union, types.UnionType) and type(None) in get_args(hint)


_ARGS_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters):\s*$", re.M)
_ARG_LINE = re.compile(r"^\s+(\w+)\s*(?:\([^)]*\))?:\s*(.+)$")


def docstring_parts(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """(first paragraph, {param: description from an "Args:" section})."""
    doc = inspect.getdoc(fn) or ""
    match = _ARGS_SECTION.search(doc)
    head = doc[: match.start()] if match else doc
    summary = " ".join(head.strip().split("\n\n")[0].split())
    params: dict[str, str] = {}
    if match:
        for line in doc[match.end():].splitlines():
            if m := _ARG_LINE.match(line):
                params[m.group(1)] = m.group(2).strip()
            elif line.strip() and not line.startswith(" "):
                break
    return summary, params


def parameters_schema(fn: Callable[..., Any]) -> dict[str, Any]:
    """The `parameters` object of a function: properties, required, no extra properties."""
    hints = typing.get_type_hints(fn, include_extras=True)
    _, documented = docstring_parts(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        hint = hints.get(name, Any)
        schema = type_schema(hint)
        if "description" not in schema and name in documented:
            schema["description"] = documented[name]
        if param.default is not inspect.Parameter.empty:
            default = param.default.value if isinstance(param.default, enum.Enum) \
                else param.default
            if default is not None:
                schema["default"] = default
        elif not _is_optional(hint):
            required.append(name)
        properties[name] = schema
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


def _enum_of(hint: Any) -> Any:
    """The Enum class behind `E`, `E | None`, `Annotated[E, ...]`, else None."""
    while get_origin(hint) is Annotated:
        hint = get_args(hint)[0]
    if get_origin(hint) in (Union, types.UnionType):
        rest = [a for a in get_args(hint) if a is not type(None)]
        hint = rest[0] if len(rest) == 1 else None
    return hint if isinstance(hint, type) and issubclass(hint, enum.Enum) else None


@lru_cache(maxsize=512)
def _call_plan(fn: Callable[..., Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """({param: Enum class}, params that are optional only through `X | None`)."""
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError, NameError):
        return {}, ()
    enums = {p.name: e for p in params if (e := _enum_of(hints.get(p.name, Any))) is not None}
    nones = tuple(p.name for p in params if p.default is inspect.Parameter.empty
                  and _is_optional(hints.get(p.name, Any)))
    return enums, nones


def call_arguments(fn: Callable[..., Any], arguments: dict[str, Any]) -> dict[str, Any]:
    """Validated JSON arguments -> the call's keyword arguments: Enum values become members
    (the schema shows the values) and an omitted `X | None` parameter without a default is None.
    """
    try:
        enums, nones = _call_plan(fn)
    except TypeError:  # an unhashable callable object: nothing to convert
        enums, nones = {}, ()
    kwargs: dict[str, Any] = dict.fromkeys(nones)
    for name, value in arguments.items():
        kind = enums.get(name)
        kwargs[name] = kind(value) if kind is not None and value is not None else value
    return kwargs
