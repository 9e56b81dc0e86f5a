"""calculator and current_time, called through the real ToolExecutor as an agent would."""

from __future__ import annotations

import json
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from agentlab.tools.executor import ToolExecutor
from agentlab.tools.registry import builtin_tools


@pytest.fixture(scope="module")
def ex() -> ToolExecutor:
    return ToolExecutor(builtin_tools())


async def calc(ex: ToolExecutor, expression: str):
    return await ex.run("calculator", {"expression": expression})


@pytest.mark.parametrize(("expression", "expected"), [
    ("2**10 + sqrt(16)", "1028"),
    ("(3 + 4) * 2", "14"),
    ("7 // 2", "3"),
    ("7 % 4", "3"),
    ("-3 + +5", "2"),
    ("max(1, 9, 4) - min(3, 2)", "7"),
    ("floor(2.7) + ceil(2.1)", "5"),
    ("round(pi, 3)", "3.142"),
    ("log10(1000)", "3"),
    ("abs(-2.5)", "2.5"),
    ("2^3", "8"),
])
async def test_calculator_values(ex, expression, expected):
    result = await calc(ex, expression)
    assert result.ok, result.observation
    assert result.output == expected


async def test_calculator_constants_and_functions(ex):
    result = await calc(ex, "cos(0) + exp(0) + log(e)")
    assert result.ok and float(result.output) == 3


@pytest.mark.parametrize(("expression", "message"), [
    ("1 / 0", "division by zero"),
    ("5 % 0", "division by zero"),
    ("x + 1", "name 'x' is not allowed"),
    ("__import__('os')", "not allowed"),
    ("open('/etc/passwd')", "function 'open' is not allowed"),
    ("(1).real", "Attribute is not allowed"),
    ("[1, 2][0]", "not allowed"),
    ("[i for i in (1, 2)]", "not allowed"),
    ("(lambda: 1)()", "not allowed"),
    ("'a' * 3", "not allowed"),
    ("2 ** 10000", "exponent"),
    ("10.0 ** 300 * 10.0 ** 300", "too large"),
    ("1 +", "not an arithmetic expression"),
    ("1" + "+1" * 400, "longer than"),
    ("sqrt(-1)", "sqrt()"),
])
async def test_calculator_refusals(ex, expression, message):
    result = await calc(ex, expression)
    assert not result.ok
    assert message in result.observation
    assert "ValueError" in result.observation


async def test_calculator_refusal_names_what_is_allowed(ex):
    result = await calc(ex, "foo * 2")
    assert "sqrt" in result.observation and "log" in result.observation


async def test_current_time_default_utc(ex):
    result = await ex.run("current_time", {})
    assert result.ok, result.observation
    data = json.loads(result.output)
    assert data["timezone"] == "UTC"
    parsed = datetime.fromisoformat(data["iso"])
    assert abs((datetime.now(ZoneInfo("UTC")) - parsed).total_seconds()) < 120


async def test_current_time_in_a_zone(ex):
    result = await ex.run("current_time", {"timezone": "Asia/Tokyo"})
    data = json.loads(result.output)
    assert data["iso"].endswith("+09:00")
    assert data["weekday"] in {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday",
                               "Saturday", "Sunday"}


async def test_current_time_unknown_zone_suggests(ex):
    result = await ex.run("current_time", {"timezone": "Mars/Olympus"})
    assert not result.ok
    assert "unknown time zone" in result.observation
    assert "Europe/Paris" in result.observation
    near = await ex.run("current_time", {"timezone": "paris"})
    assert not near.ok and "Europe/Paris" in near.observation
