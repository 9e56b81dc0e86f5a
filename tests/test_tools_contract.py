"""The tools contract that paradigms and admin rows code against (beyond test_tools_core)."""

from __future__ import annotations

import asyncio
import enum
import json
import threading
import time
from typing import Annotated, Literal

import pytest

from agentlab.tools.decorator import ToolSpec, tool
from agentlab.tools.executor import ToolExecutor, ToolPolicy, ToolResult
from agentlab.tools.registry import builtin_tools, get_tool
from agentlab.tools.schema import type_schema


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@tool
def plan(
    steps: list[str],
    level: Level = Level.LOW,
    note: str | None = None,
    mode: Literal[1, 2, 3] = 1,
    when: Annotated[str | None, "ISO date"] = None,
) -> dict:
    """Make a plan.

    Args:
        steps: what to do, in order
        note: documented, but no Annotated text
        when: overridden by the Annotated text
    """
    return {"steps": steps, "level": int(level), "note": note, "mode": mode, "when": when}


@tool
def nothing() -> dict:
    """Return data that json.dumps must render readably: non-ASCII, dates."""
    from datetime import date

    return {"city": "São Paulo", "day": date(2026, 6, 30)}


@tool
def nap(seconds: float) -> str:
    """Sleep in a thread."""
    time.sleep(seconds)
    return "rested"


@tool
def flags(on: bool, count: int, share: float) -> dict:
    """Echo the coerced values."""
    return {"on": on, "count": count, "share": share}


EX = ToolExecutor({t.name: t for t in (plan, nothing, nap, flags)})


def run(executor: ToolExecutor, name: str, args) -> ToolResult:
    return asyncio.run(executor.run(name, args))


def test_schema_optionals_int_enums_docstring_args_and_annotated_priority():
    params = plan.parameters
    props = params["properties"]
    assert params["required"] == ["steps"]
    assert props["steps"] == {"type": "array", "items": {"type": "string"},
                              "description": "what to do, in order"}
    assert props["level"] == {"type": "integer", "enum": [1, 2], "default": 1}
    assert props["note"] == {"type": "string", "description": "documented, but no Annotated text"}
    assert props["mode"] == {"type": "integer", "enum": [1, 2, 3], "default": 1}
    assert props["when"] == {"type": "string", "description": "ISO date"}
    assert plan.description == "Make a plan."
    assert nothing.parameters == {"type": "object", "properties": {},
                                  "additionalProperties": False}
    with pytest.raises(TypeError, match="no JSON Schema"):
        type_schema(object)


def test_openai_schema_shape():
    schema = plan.openai_schema()
    assert schema == {"type": "function", "function": {
        "name": "plan", "description": "Make a plan.", "parameters": plan.parameters}}


def test_policy_description_overrides_and_hidden_tools_are_not_offered():
    policies = {"plan": ToolPolicy(description="Plan carefully."),
                "nap": ToolPolicy(enabled=False),
                "flags": ToolPolicy(allowed_groups=frozenset({"ops"}))}
    executor = ToolExecutor(EX.tools, policies, user_groups={"sales"})
    assert executor.names == ["plan", "nothing"]
    offered = {t["function"]["name"]: t["function"] for t in executor.openai_tools()}
    assert set(offered) == {"plan", "nothing"}
    assert offered["plan"]["description"] == "Plan carefully."
    assert "Plan carefully." in executor.describe().splitlines()[0]
    assert executor.spec("nap") is nap and executor.spec("nope") is None
    assert not executor.needs_approval("nope")
    unknown = run(executor, "nap", {"seconds": 0})
    assert unknown.error_type == "disabled"
    assert "Available tools: plan, nothing" in run(executor, "nope", {}).observation


def test_coercion_of_strings_from_small_models():
    result = run(EX, "flags", {"on": "false", "count": " 3 ", "share": "2.5"})
    assert result.ok and result.arguments == {"on": False, "count": 3, "share": 2.5}
    assert run(EX, "flags", {"on": True, "count": 4.0, "share": 1}).arguments == {
        "on": True, "count": 4, "share": 1}
    as_json = run(EX, "flags", '{"on": "true", "count": "7", "share": 0.1}')
    assert as_json.ok and as_json.arguments == {"on": True, "count": 7, "share": 0.1}
    assert run(EX, "plan", {"steps": '["a", "b"]'}).arguments == {"steps": ["a", "b"]}
    assert run(EX, "nothing", None).ok and run(EX, "nothing", "").ok


@pytest.mark.parametrize(("args", "expected"), [
    ({"on": "maybe", "count": 1, "share": 1}, "field 'on': expected boolean, got 'maybe'"),
    ({"on": True, "count": "2.5", "share": 1}, "field 'count': expected integer, got '2.5'"),
    ({"on": True, "count": 1, "share": "lots"}, "field 'share': expected number, got 'lots'"),
    ({"on": True, "count": 1}, "'share' is a required property"),
    ([1, 2], "expected a JSON object, got list"),
])
def test_validation_names_the_field_and_the_expectation(args, expected):
    result = run(EX, "flags", args)
    assert not result.ok and result.error_type == "validation"
    assert result.observation.startswith("Error: invalid arguments for flags: ")
    assert expected in result.observation
    assert result.output == ""


def test_nested_field_path_is_named():
    result = run(EX, "plan", {"steps": ["a", 3]})
    assert "field 'steps.1': expected string, got 3" in result.observation


def test_non_string_output_is_rendered_as_one_line_of_json_and_result_serialises():
    result = run(EX, "nothing", {})
    # As the few-shot examples show results, accents as they are.
    assert result.output == '{"city": "São Paulo", "day": "2026-06-30"}'
    assert result.observation == result.output and not result.truncated
    data = result.to_dict()
    assert set(data) == {"tool", "arguments", "ok", "output", "observation", "error",
                         "error_type", "truncated", "duration_ms"}
    json.dumps(data)  # a trace step stores it as JSON


async def test_sync_tools_do_not_block_the_event_loop():
    """Five sync calls meet at a barrier: it opens only if all five run at once, each in its
    own thread, while the loop goes on starting the next (no clock involved)."""
    barrier = threading.Barrier(5, timeout=20)

    @tool
    def meet() -> str:
        """Wait for the four others."""
        barrier.wait()
        return "met"

    executor = ToolExecutor({"meet": meet})
    results = await asyncio.gather(*(executor.run("meet", {}) for _ in range(5)))
    assert [r.output for r in results] == ["met"] * 5, results[0].observation


async def test_a_timeout_is_reported_with_the_effective_limit():
    executor = ToolExecutor(EX.tools, {"nap": ToolPolicy(timeout_s=0.5)})
    result = await executor.run("nap", {"seconds": 3}, timeout_s=5)  # the lower limit wins
    assert result.error_type == "timeout" and "timed out after 0.5 s" in result.observation


def test_custom_truncation_limit():
    executor = ToolExecutor(EX.tools, {"nothing": ToolPolicy(max_observation_chars=10)})
    result = run(executor, "nothing", {})
    assert result.truncated and result.output.startswith("{\"city\": ")
    assert result.observation.endswith(
        f"[truncated: {len(result.output):,} characters, first 10 shown]")


def test_registry_is_cached_and_every_builtin_is_a_valid_spec():
    tools = builtin_tools()
    assert builtin_tools() is tools
    assert get_tool("calculator") is tools["calculator"] and get_tool("nope") is None
    for name, spec in tools.items():
        assert isinstance(spec, ToolSpec) and spec.name == name
        assert spec.description and spec.parameters["type"] == "object"
        assert spec.openai_schema()["function"]["name"] == name
    writers = {n for n, t in tools.items() if t.side_effects}
    assert writers == {"update_delivery_date", "send_email"}
    assert {tools[n].category for n in writers} == {"erp"}
