"""@tool schemas and the executor: validation, coercion, refusals, timeouts, truncation."""

from __future__ import annotations

import asyncio
import enum
import threading
from typing import Annotated, Literal

import pytest

from agentlab.tools.decorator import tool
from agentlab.tools.executor import ToolExecutor, ToolPolicy, truncate
from agentlab.tools.schema import NOT_EMPTY


class Unit(enum.Enum):
    C = "celsius"
    F = "fahrenheit"


@tool
def forecast(
    city: Annotated[str, "city name", NOT_EMPTY],
    days: int = 1,
    unit: Unit = Unit.C,
    detail: Literal["short", "long"] = "short",
    hours: list[int] | None = None,
    ratio: float = 0.5,
    alerts: bool = False,
) -> dict:
    """Forecast for a city.

    More prose that the LLM does not need.
    """
    return {"city": city, "days": days, "unit": unit, "detail": detail, "hours": hours}


@tool(name="lookup", description="Look a word up", side_effects=True, category="demo")
async def _lookup(word: str) -> str:
    """Ignored docstring.

    Args:
        word: the word to look up
    """
    return f"{word}: a word"


class Gate:
    """Holds the busy tools below until the test lets them go (or far longer than any timeout
    here): a test then knows an answer came while they were still busy, without a clock. Each
    test opens its own, so a tool released late by an earlier test reports to that one."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.finished: list[str] = []


GATE = Gate()


@pytest.fixture
def gate():
    global GATE
    GATE = Gate()
    yield GATE
    GATE.release.set()


@tool
def slow(seconds: float) -> str:
    """Busy until released (at most `seconds`), then answer."""
    gate = GATE
    gate.release.wait(seconds)
    gate.finished.append("slow")
    return "done"


@tool
async def slow_async(seconds: float) -> str:
    """Busy (async) until cancelled, at most `seconds`."""
    gate = GATE
    try:
        await asyncio.wait_for(asyncio.Event().wait(), seconds)
    except asyncio.CancelledError:
        gate.finished.append("slow_async cancelled")
        raise
    gate.finished.append("slow_async")
    return "done"


@tool
def broken(x: int) -> int:
    """Always raises."""
    raise ValueError(f"cannot handle {x}")


@tool
def big() -> str:
    """A long observation."""
    return "x" * 18_211


def run(executor: ToolExecutor, name: str, args):
    return asyncio.run(executor.run(name, args))


EX = ToolExecutor({t.name: t for t in (forecast, _lookup, slow, slow_async, broken, big)})


def test_schema_from_every_kind_of_hint():
    params = forecast.parameters
    props = params["properties"]
    assert forecast.description == "Forecast for a city."
    assert params["required"] == ["city"] and params["additionalProperties"] is False
    # A dict in Annotated adds its JSON Schema keywords (the embedded model's grammar keeps them).
    assert props["city"] == {"type": "string", "minLength": 1, "description": "city name"}
    assert props["days"] == {"type": "integer", "default": 1}
    assert props["unit"] == {"type": "string", "enum": ["celsius", "fahrenheit"],
                             "default": "celsius"}
    assert props["detail"] == {"type": "string", "enum": ["short", "long"], "default": "short"}
    assert props["hours"] == {"type": "array", "items": {"type": "integer"}}
    assert props["ratio"] == {"type": "number", "default": 0.5}
    assert props["alerts"] == {"type": "boolean", "default": False}
    assert not forecast.is_async and forecast.openai_schema()["type"] == "function"


def test_options_docstring_args_and_async_detection():
    assert _lookup.name == "lookup" and _lookup.description == "Look a word up"
    assert _lookup.is_async and _lookup.side_effects and _lookup.category == "demo"
    assert _lookup.parameters["properties"]["word"]["description"] == "the word to look up"


def test_safe_coercion_and_a_bare_string_for_a_single_parameter():
    result = run(EX, "forecast", {"city": "Paris", "days": "3", "ratio": "2.5",
                                  "alerts": "true", "hours": "[1, 2]"})
    assert result.ok and result.arguments == {"city": "Paris", "days": 3, "ratio": 2.5,
                                              "alerts": True, "hours": [1, 2]}
    assert run(EX, "lookup", "serendipity").output == "serendipity: a word"
    assert run(EX, "forecast", '{"city": "Rome"}').arguments == {"city": "Rome"}


@pytest.mark.parametrize(("args", "expected"), [
    ({}, "'city' is a required property"),
    ({"city": ""}, "field 'city': '' should be non-empty"),
    ({"city": "Paris", "days": "many"}, "field 'days': expected integer, got 'many'"),
    ({"city": "Paris", "detail": "medium"}, "field 'detail': 'medium' is not one of"),
    ({"city": "Paris", "colour": "red"}, "'colour' was unexpected"),
])
def test_validation_errors_name_the_field(args, expected):
    result = run(EX, "forecast", args)
    assert not result.ok and result.error_type == "validation"
    assert result.observation.startswith("Error: invalid arguments for forecast")
    if expected:
        assert expected in result.observation


def test_text_where_an_object_is_needed_is_refused():
    result = run(EX, "broken", "just text")
    assert result.error_type == "validation"
    assert "expected a JSON object with the fields x, got the text 'just text'" in result.error


def test_unknown_tool_lists_the_available_ones():
    result = run(EX, "get_wether", {"city": "Paris"})
    assert result.error_type == "unknown_tool"
    assert "'get_wether'" in result.observation and "forecast, lookup" in result.observation


def test_an_exception_is_an_observation_with_type_and_message():
    result = run(EX, "broken", {"x": 3})
    assert result.error_type == "exception"
    assert result.observation == "Error: broken raised ValueError: cannot handle 3"


@pytest.mark.parametrize("name", ["slow", "slow_async"])
def test_sync_and_async_tools_time_out(name, gate):
    executor = ToolExecutor({t.name: t for t in (slow, slow_async)},
                            {name: ToolPolicy(timeout_s=0.2)})
    result = run(executor, name, {"seconds": 30})
    assert result.error_type == "timeout"
    assert result.observation == f"Error: tool {name} timed out after 0.2 s"
    # The answer came while the tool was still busy: a sync one goes on in its thread (it
    # cannot be killed), an async one was cancelled.
    assert gate.finished == ([] if name == "slow" else ["slow_async cancelled"])
    # The run's own tool timeout caps the policy's.
    capped = asyncio.run(ToolExecutor({name: executor.tools[name]}).run(
        name, {"seconds": 30}, timeout_s=0.1))
    assert capped.error == f"tool {name} timed out after 0.1 s"


def test_sync_tools_reuse_their_threads_and_a_hung_one_holds_up_no_other(gate):
    threads = []  # the thread objects themselves (kept alive, so never mistaken for another)

    @tool
    def where() -> str:
        """Which thread runs this."""
        threads.append(threading.current_thread())
        return "here"

    executor = ToolExecutor({t.name: t for t in (slow, where)},
                            {"slow": ToolPolicy(timeout_s=0.2)})

    async def calls():
        for _ in range(20):
            assert (await executor.run("where", {})).error is None
        # A tool still busy after its timeout keeps its thread; the next call gets another.
        hung = await executor.run("slow", {"seconds": 30})
        after = await executor.run("where", {})
        return hung, after, list(gate.finished)

    hung, after, finished_by_then = asyncio.run(calls())
    # Twenty calls in a row ran on the threads already idle (earlier tests may have left a few),
    # not on a new thread each.
    assert len(set(threads[:20])) <= 5
    assert all(t.daemon for t in threads)  # a hung tool never holds up the process's exit
    assert hung.error_type == "timeout"
    # The next call was answered while the hung one still held its thread.
    assert after.error is None and finished_by_then == []


def test_long_observations_are_cut_for_the_llm_but_kept_whole():
    result = run(EX, "big", {})
    assert result.truncated and len(result.output) == 18_211
    assert result.observation.endswith("[truncated: 18,211 characters, first 4,000 shown]")
    assert result.observation.startswith("x" * 4000)
    assert truncate("short", 10) == ("short", False)


def test_permission_disabled_and_approval():
    policies = {"forecast": ToolPolicy(allowed_groups=frozenset({"meteo"})),
                "big": ToolPolicy(enabled=False), "lookup": ToolPolicy(needs_approval=True)}
    outsider = ToolExecutor(EX.tools, policies, user_groups=["sales"])
    assert "forecast" not in outsider.names and "big" not in outsider.names
    denied = run(outsider, "forecast", {"city": "Paris"})
    assert denied.error_type == "permission" and "permission denied" in denied.observation
    assert run(outsider, "big", {}).error_type == "disabled"
    assert outsider.needs_approval("lookup") and not outsider.needs_approval("forecast")
    assert run(ToolExecutor(EX.tools, policies, user_groups=["meteo"]), "forecast",
               {"city": "Paris"}).ok
    assert run(ToolExecutor(EX.tools, policies, is_superuser=True), "forecast",
               {"city": "Paris"}).ok


def test_describe_lists_arguments_for_text_prompts():
    line = EX.describe().splitlines()[0]
    assert line.startswith("forecast(city: string, days: integer?")
    assert line.endswith("Forecast for a city.")


def test_truncation_at_its_edges():
    """A limit of 0 means no cut; a text exactly at the limit is whole; one more is cut."""
    assert truncate("abc", 0) == ("abc", False)
    assert truncate("abc", 3) == ("abc", False)
    assert truncate("abcd", 3) == ("abc\n[truncated: 4 characters, first 3 shown]", True)
    assert truncate("ab", 1) == ("a\n[truncated: 2 characters, first 1 shown]", True)


def test_describe_names_untyped_and_optional_parameters_and_bare_tools():
    from agentlab.tools.decorator import ToolSpec

    def fn(**_kwargs):
        return "x"

    untyped = ToolSpec(name="probe", description="Probe it.", fn=fn, is_async=False,
                       parameters={"type": "object", "properties": {"what": {}},
                                   "required": ["what"]})
    bare = ToolSpec(name="ping", description="Ping.", fn=fn, is_async=False,
                    parameters={"type": "object"})
    assert ToolExecutor({"probe": untyped, "ping": bare}).describe().splitlines() == [
        "probe(what: any): Probe it.", "ping(): Ping."]


def test_every_outcome_says_which_call_it_was_and_how_long_it_took(gate):
    """The trace shows a tool step from its ToolResult: the tool, the arguments as they were
    used (coerced), ok or the kind of failure, and a duration within the call's own time."""
    import time as clock

    @tool
    def pause(ms: int) -> str:
        """Take at least `ms` milliseconds (the subject of the test, not a wait)."""
        clock.sleep(ms / 1000)
        return "done"

    executor = ToolExecutor({t.name: t for t in (forecast, broken, slow, pause)},
                            {"slow": ToolPolicy(timeout_s=0.1)})
    cases = [
        ("pause", {"ms": "30"}, True, None, {"ms": 30}),
        ("forecast", {"city": "Paris", "days": "x"}, False, "validation",
         {"city": "Paris", "days": "x"}),
        ("broken", {"x": "3"}, False, "exception", {"x": 3}),
        ("slow", {"seconds": "30"}, False, "timeout", {"seconds": 30.0}),
    ]
    for name, arguments, ok, kind, used in cases:
        before = clock.perf_counter()
        result = run(executor, name, arguments)
        spent_ms = (clock.perf_counter() - before) * 1000
        assert (result.tool, result.arguments, result.ok, result.error_type) == (
            name, used, ok, kind), name
        assert 0 <= result.duration_ms <= spent_ms, name
    assert run(executor, "pause", {"ms": 30}).duration_ms >= 30  # it did take that long
    refused = run(ToolExecutor({}), "nothing", {"a": 1})
    assert (refused.tool, refused.arguments, refused.ok) == ("nothing", {"a": 1}, False)
    assert refused.error == "unknown tool 'nothing'. Available tools: none"
    disabled = run(ToolExecutor({"forecast": forecast}, {"forecast": ToolPolicy(enabled=False)}),
                   "forecast", {"city": "Paris"})
    assert disabled.error == "the tool 'forecast' is disabled by the administrator"


def test_enum_arguments_reach_the_tool_as_members():
    assert '"unit": "Unit.F"' in run(EX, "forecast", {"city": "Paris", "unit": "fahrenheit"}).output
