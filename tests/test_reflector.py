"""Reflectors: one test per rule, and the LLM reflector's JSON and fallback."""

from __future__ import annotations

import json

import pytest

from agentlab.paradigms.reflector import LLMReflector, RuleReflector, make_reflector
from tests.scripted_model import ScriptedModel, make_context


async def verdict(observation: str, *, ok: bool = False, action: str = "sql_query",
                  arguments: dict | None = None, history: list | None = None):
    ctx, _ = make_context(ScriptedModel([]))
    return await RuleReflector().reflect(ctx, task="t", action=action,
                                         arguments=arguments or {"query": "select"},
                                         observation=observation, ok=ok, history=history or [])


@pytest.mark.parametrize(("observation", "ok", "rule", "hint"), [
    ("Error: no such column: price", False, "schema", "describe_table"),
    ("OperationalError: no such table: sales", False, "schema", "list_tables"),
    ("Error: [Errno 111] Connection refused", False, "unreachable", "another source"),
    ("Error: host unreachable", False, "unreachable", "Retry later"),
    ("Error: unknown tool 'teleport'. Available tools: sql_query", False, "unknown_tool",
     "exact name"),
    ("Error: invalid arguments for sql_query: field 'limit': expected integer, got 'ten'",
     False, "validation", "'limit'"),
    ("Error: 'city' is a required property (fields: city)", False, "validation", "'city'"),
    ("Error: tool sql_query timed out after 30 s", False, "timeout", "Narrow"),
    ("Error: permission denied: you may not use the tool 'shell'", False, "permission",
     "Do not retry"),
    ("Error: the tool 'shell' is disabled by the administrator", False, "permission",
     "another tool"),
    ("Error: the user denied this call: not today", False, "permission", "Do not retry"),
    ("[]", True, "empty_result", "Relax"),
    ("0 rows", True, "empty_result", "Relax"),
    ("No results for 'atlantis'", True, "empty_result", "Relax"),
    ("no matches", True, "empty_result", "Relax"),
    ("Error: something odd", False, "error", "change the arguments"),
])
async def test_rules(observation: str, ok: bool, rule: str, hint: str) -> None:
    reflection = await verdict(observation, ok=ok)
    assert reflection.rule == rule and not reflection.plan_valid
    assert hint in reflection.suggestion


async def test_a_useful_result_keeps_the_plan() -> None:
    reflection = await verdict("Paris has 2.1 million people; the timeout page said so", ok=True)
    assert (reflection.rule, reflection.plan_valid) == ("ok", True)


async def test_repeated_action() -> None:
    history = [{"action": "sql_query", "arguments": {"query": "select"}}]
    reflection = await verdict("1 row", ok=True, history=history)
    assert reflection.rule == "repeated_action" and "different" in reflection.suggestion


async def test_llm_reflector_reads_json() -> None:
    answer = {"goal_achieved": True, "plan_valid": True, "suggestion": "Answer now."}
    model = ScriptedModel([json.dumps(answer)])
    ctx, sink = make_context(ScriptedModel([]), models={"reflector": model})
    reflection = await LLMReflector().reflect(ctx, task="t", action="a", arguments={},
                                              observation="42", ok=True, history=[])
    assert (reflection.goal_achieved, reflection.suggestion, reflection.rule) == (
        True, "Answer now.", "llm")
    assert model.requests[0]["response_format"]["json_schema"]["name"] == "reflection"
    assert sink.steps[0].role == "reflector"


async def test_llm_reflector_falls_back_to_the_rules() -> None:
    ctx, _ = make_context(ScriptedModel([]),
                          models={"reflector": ScriptedModel(['{"plan_valid": "maybe"}'])})
    reflection = await LLMReflector().reflect(ctx, task="t", action="a", arguments={},
                                              observation="Error: no such table: x", ok=False,
                                              history=[])
    assert reflection.rule == "schema" and "not usable JSON" in reflection.meta["fallback"]


def test_make_reflector() -> None:
    assert make_reflector("none") is None
    assert isinstance(make_reflector("rule"), RuleReflector)
    with pytest.raises(ValueError, match="unknown reflector"):
        make_reflector("oracle")
