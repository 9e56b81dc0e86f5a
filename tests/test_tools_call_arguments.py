"""From validated JSON to the Python call: Enum members, None for `X | None`, null = omitted."""

from __future__ import annotations

import asyncio
import enum
from typing import Annotated

from agentlab.tools.decorator import tool
from agentlab.tools.executor import ToolExecutor, ToolResult
from agentlab.tools.schema import call_arguments


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


@tool
def convert(value: float, unit: Annotated[Unit, "target unit"] = Unit.CELSIUS,
            fallback: Unit | None = None) -> dict:
    """Echo what the function really received."""
    return {"unit": repr(unit), "is_member": isinstance(unit, Unit), "fallback": repr(fallback)}


@tool
def greet(name: str, title: str | None, times: int = 2) -> str:
    """`title` has no default: optional only through `| None`."""
    return f"{title or ''}{name}" * times


EX = ToolExecutor({t.name: t for t in (convert, greet)})


def run(name: str, args: object) -> ToolResult:
    return asyncio.run(EX.run(name, args))


def test_enum_values_reach_the_function_as_members():
    result = run("convert", {"value": 1, "unit": "fahrenheit", "fallback": "celsius"})
    assert result.ok, result.observation
    assert '"is_member": true' in result.output
    assert "Unit.FAHRENHEIT" in result.output and "Unit.CELSIUS" in result.output
    assert result.arguments == {"value": 1, "unit": "fahrenheit", "fallback": "celsius"}  # JSON
    default = run("convert", {"value": 1})
    assert default.ok and "Unit.CELSIUS" in default.output and "None" in default.output


def test_optional_without_default_is_none_when_omitted():
    assert "greet" in EX.names and greet.parameters["required"] == ["name"]
    result = run("greet", {"name": "Ada"})
    assert result.ok, result.observation
    assert result.output == "AdaAda"
    assert run("greet", {"name": "Ada", "title": "Dr ", "times": 1}).output == "Dr Ada"


def test_null_for_an_optional_parameter_means_not_given():
    result = run("greet", {"name": "Ada", "title": None, "times": None})
    assert result.ok, result.observation
    assert result.output == "AdaAda" and result.arguments == {"name": "Ada"}
    required_null = run("greet", {"name": None})
    assert required_null.error_type == "validation"
    assert "field 'name': expected string, got None" in required_null.observation


def test_call_arguments_leaves_plain_callables_alone():
    assert call_arguments(lambda **kw: kw, {"a": 1}) == {"a": 1}

    class Unhashable:
        __hash__ = None  # type: ignore[assignment]

        def __call__(self, **kw: object) -> object:
            return kw

    assert call_arguments(Unhashable(), {"a": 1}) == {"a": 1}
