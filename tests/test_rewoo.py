"""ReWOO's control flow, driven by a scripted model through the real runtime and tool executor.

A scripted model is right here: these tests check which calls are made, in which order and at
the same time or not, and what the solver is shown — not whether a real model writes good plans.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from agentlab.paradigms._rewoo_evidence import tool_arguments
from agentlab.paradigms.registry import validate_params
from agentlab.paradigms.rewoo import ReWOO
from agentlab.runtime.limits import Limits
from agentlab.runtime.loop import execute
from agentlab.tools.decorator import tool
from agentlab.tools.registry import get_tool
from tests.scripted_model import ScriptedModel, make_context

EVENTS: list[tuple[str, float, float]] = []  # (what, started, ended) of each tool call
TEMPERATURES = {"paris": "Paris: 14 C", "tokyo": "Tokyo: 16 C"}


@tool
async def weather(city: str) -> str:
    """The weather in a city (takes 0.2 s)."""
    started = time.perf_counter()
    await asyncio.sleep(0.2)
    EVENTS.append((f"weather {city}", started, time.perf_counter()))
    return TEMPERATURES.get(city.strip().lower(), f"no data for {city}")


@tool
async def compare(a: str, b: str) -> str:
    """Compare two texts (takes 0.2 s)."""
    started = time.perf_counter()
    await asyncio.sleep(0.2)
    EVENTS.append(("compare", started, time.perf_counter()))
    return f"compared {a} with {b}"


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return f"ECHO {text}"


@tool
def broken(x: str) -> str:
    """Always fails."""
    raise RuntimeError("the sensor is offline")


TOOLS = [weather, compare, echo, broken]


@pytest.fixture(autouse=True)
def _clear_events() -> None:
    EVENTS.clear()


async def run(plan: str, *more: str, tools=TOOLS, params=None, **kwargs):
    model = ScriptedModel([plan, *more, "The answer."] if not more else [plan, *more])
    ctx, sink = make_context(model, tools, params=validate_params("rewoo", params or {}),
                             **kwargs)
    outcome = await execute(ReWOO(), ctx, "Which is warmer, Paris or Tokyo?")
    return outcome, sink, model, ctx


def solver_prompt(model: ScriptedModel) -> str:
    return model.requests[-1]["messages"][-1]["content"]


PARALLEL_PLAN = """\
Plan: Look up the weather in Paris.
#E1 = weather[Paris]
Plan: Look up the weather in Tokyo.
#E2 = weather[Tokyo]
Plan: Compare the two.
#E3 = compare[{"a": "#E1", "b": "#E2"}]
"""


async def test_two_llm_calls_independent_steps_overlap_dependent_waits() -> None:
    outcome, sink, model, _ = await run(PARALLEL_PLAN)
    assert outcome.status == "succeeded" and outcome.answer == "The answer."
    assert len(model.requests) == 2 and outcome.totals.llm_calls == 2
    assert [s.role for s in sink.of_kind("llm")] == ["planner", "solver"]
    (paris, tokyo, comparison) = (next(e for e in EVENTS if e[0] == name)
                                  for name in ("weather Paris", "weather Tokyo", "compare"))
    assert paris[1] < tokyo[2] and tokyo[1] < paris[2]  # the two lookups overlap in time
    assert comparison[1] >= max(paris[2], tokyo[2])  # the dependent step waits for both
    (plan,) = sink.of_kind("plan")
    assert plan.role == "planner"
    assert plan.output[2] == {"var": "#E3", "plan": "Compare the two.", "tool": "compare",
                              "tool_input": '{"a": "#E1", "b": "#E2"}',
                              "depends_on": ["#E1", "#E2"]}
    tools = sink.of_kind("tool")
    assert {(s.role, s.parent) for s in tools} == {("worker", plan.seq)}
    assert tools[2].input == {"a": "Paris: 14 C", "b": "Tokyo: 16 C"}
    prompt = solver_prompt(model)
    assert "#E3 = compare[" in prompt and "compared Paris: 14 C with Tokyo: 16 C" in prompt
    assert "Which is warmer, Paris or Tokyo?" in prompt
    # the planner was shown the tools and the format
    planner_system = model.requests[0]["messages"][0]["content"]
    assert "weather(city: string)" in planner_system and "#E1 = <Tool>[<input>]" in planner_system


async def test_the_planner_is_sent_its_examples_and_the_plan_shape() -> None:
    examples = [{"role": "user", "content": "Task: What is the weather in Rome?"},
                {"role": "assistant", "content": "Plan: Look it up.\n#E1 = weather[Rome]\n"}]
    _, _, model, _ = await run(PARALLEL_PLAN, params={"few_shot": examples, "max_plan_steps": 3})
    planner = model.requests[0]
    # The examples come between the system prompt and the task, as chat turns.
    assert planner["messages"][1:] == [*examples, {"role": "user", "content":
                                                   "Task: Which is warmer, Paris or Tokyo?"}]
    # The plan's shape: the agent's tools and LLM, at most max_plan_steps steps (the embedded
    # model's client turns it into a grammar, tests/test_llm_client_scripted.py).
    assert planner["response_format"] == {"type": "rewoo_plan", "max_steps": 3,
                                          "tools": ["weather", "compare", "echo", "broken",
                                                    "LLM"]}


async def test_similar_last_puts_the_example_like_the_task_nearest_it() -> None:
    tokyo = [{"role": "user", "content": "Task: Which is warmer, Rome or Tokyo?"},
             {"role": "assistant", "content": "Plan: a\n#E1 = weather[Rome]\n"}]
    sums = [{"role": "user", "content": "Task: What is 2 + 2?"},
            {"role": "assistant", "content": "Plan: b\n#E1 = echo[2 + 2]\n"}]
    params = {"few_shot": [*tokyo, *sums], "few_shot_order": "similar_last"}
    _, _, model, _ = await run(PARALLEL_PLAN, params=params)
    assert model.requests[0]["messages"][1:5] == [*sums, *tokyo]
    _, _, model, _ = await run(PARALLEL_PLAN, params={**params, "few_shot_order": "given"})
    assert model.requests[0]["messages"][1:5] == [*tokyo, *sums]


async def test_llm_step_is_the_only_extra_call() -> None:
    plan = ("Plan: a\n#E1 = weather[Paris]\nPlan: b\n#E2 = weather[Tokyo]\n"
            "Plan: c\n#E3 = LLM[Which is warmer: #E1 or #E2?]")
    outcome, sink, model, _ = await run(plan, "Tokyo", "Tokyo is warmer.")
    assert outcome.answer == "Tokyo is warmer." and len(model.requests) == 3
    llm = sink.of_kind("llm")
    assert [s.role for s in llm] == ["planner", "worker", "solver"]
    assert llm[1].parent == sink.of_kind("plan")[0].seq
    assert "Which is warmer: Paris: 14 C or Tokyo: 16 C?" in json.dumps(model.requests[1])
    assert "#E3 = LLM[Which is warmer: #E1 or #E2?]\nEvidence: Tokyo" in solver_prompt(model)


async def test_a_one_step_plan_with_a_plain_value_is_answered_without_a_solver() -> None:
    """"391" to "What is 17 * 23?" is the answer: the 135M solver restated it as "409"."""
    outcome, sink, model, _ = await run("Plan: Look it up.\n#E1 = weather[Tokyo]")
    assert outcome.status == "succeeded" and outcome.answer == "Tokyo: 16 C"
    assert [s.role for s in sink.of_kind("llm")] == ["planner"] and len(model.requests) == 1
    assert sink.of_kind("final")[0].output == "Tokyo: 16 C"


@pytest.mark.parametrize("plan", [
    "Plan: a\n#E1 = broken[x]",  # an error is no answer
    "Plan: a\n#E1 = echo[" + "long " * 30 + "]",  # nor a paragraph
    'Plan: a\n#E1 = echo[{"text": "x"}]\nPlan: b\n#E2 = weather[Paris]',  # nor one of two
])
async def test_other_plans_are_answered_by_the_solver(plan: str) -> None:
    outcome, sink, _, _ = await run(plan)
    assert outcome.answer == "The answer."
    assert [s.role for s in sink.of_kind("llm")] == ["planner", "solver"]


async def test_the_solver_is_sent_its_examples_before_the_evidence() -> None:
    examples = [{"role": "user", "content": "Task: What is 2 + 2?\nEvidence: 4"},
                {"role": "assistant", "content": "4"}]
    _, _, model, _ = await run(PARALLEL_PLAN, params={"solver_few_shot": examples})
    solver = model.requests[-1]["messages"]
    assert solver[:2] == examples and "compared Paris: 14 C" in solver[2]["content"]


async def test_unknown_tool_is_an_error_fed_to_the_solver() -> None:
    outcome, sink, model, _ = await run("Plan: go\n#E1 = teleport[Mars]\n"
                                        "Plan: w\n#E2 = Weather[Paris]")
    assert outcome.status == "succeeded" and len(model.requests) == 2
    (error,) = sink.of_kind("error")
    assert error.role == "worker" and error.parent == sink.of_kind("plan")[0].seq
    assert "unknown tool 'teleport'" in error.text and "weather, compare" in error.text
    assert "Evidence: (error: #E1 uses the unknown tool 'teleport'" in solver_prompt(model)
    assert "Evidence: Paris: 14 C" in solver_prompt(model)  # tool names match case-insensitively


async def test_missing_reference_and_its_dependents() -> None:
    outcome, sink, model, _ = await run("Plan: a\n#E1 = weather[#E3]\nPlan: b\n#E2 = echo[#E1]")
    assert outcome.status == "succeeded" and len(model.requests) == 2
    first, second = (s.text for s in sink.of_kind("error"))
    assert first == "#E1 refers to #E3, which no earlier step defines; it was not run"
    assert second == "skipped: #E1 failed"
    assert not sink.of_kind("tool")
    assert "Evidence: (error: skipped: #E1 failed)" in solver_prompt(model)


async def test_duplicate_variable_keeps_the_first_definition() -> None:
    plan = "Plan: a\n#E1 = weather[Paris]\nPlan: b\n#E1 = weather[Tokyo]\nPlan: c\n#E2 = echo[#E1]"
    outcome, sink, model, _ = await run(plan)
    assert outcome.status == "succeeded" and len(model.requests) == 2
    (error,) = sink.of_kind("error")
    assert error.text == "#E1 is defined twice (steps 1 and 2); step 2 was not run"
    assert [e[0] for e in EVENTS] == ["weather Paris"]
    assert sink.of_kind("tool")[-1].input == {"text": "Paris: 14 C"}


async def test_no_steps_is_an_error_and_the_solver_still_answers() -> None:
    outcome, sink, model, ctx = await run("I would look up both cities and compare them.",
                                          "Probably Tokyo.")
    assert outcome.status == "succeeded" and outcome.answer == "Probably Tokyo."
    assert len(model.requests) == 2 and ctx.totals.format_errors == 1
    (plan,) = sink.of_kind("plan")
    assert plan.status == "error" and plan.output == []
    (error,) = sink.of_kind("error")
    assert error.role == "worker" and "#E1 = Tool[input]" in error.text
    assert "(error: the planner wrote no readable plan" in solver_prompt(model)


async def test_e1_never_rewrites_e10() -> None:
    plan = "Plan: a\n#E1 = echo[one]\nPlan: b\n#E10 = echo[ten]\nPlan: c\n#E2 = echo[#E1, #E10]"
    outcome, sink, _, _ = await run(plan)
    assert outcome.status == "succeeded"
    assert sink.of_kind("tool")[-1].input == {"text": "ECHO one, ECHO ten"}


async def test_failed_tool_skips_its_dependents() -> None:
    outcome, sink, model, _ = await run("Plan: a\n#E1 = broken[x]\nPlan: b\n#E2 = weather[#E1]")
    assert outcome.status == "succeeded"
    assert [s.name for s in sink.of_kind("tool")] == ["broken"]
    assert sink.of_kind("error")[0].text == "skipped: #E1 failed"
    assert "Evidence: (error: broken raised RuntimeError: the sensor is offline)" in \
        solver_prompt(model)


async def test_identical_calls_run_once() -> None:
    plan = "\n".join(f"Plan: p{n}\n#E{n} = weather[Paris]" for n in (1, 2, 3))
    outcome, sink, _, _ = await run(plan)
    assert outcome.status == "succeeded"  # three equal calls are no loop: they run once
    assert len(EVENTS) == 1
    assert [s.meta.get("reused") for s in sink.of_kind("tool")] == [None, "#E1", "#E1"]


async def test_steps_over_max_plan_steps_are_reported() -> None:
    outcome, sink, _, _ = await run("#E1 = echo[a]\n#E2 = echo[b]", params={"max_plan_steps": 1})
    assert outcome.status == "succeeded" and len(sink.of_kind("tool")) == 1
    assert sink.of_kind("error")[0].text == "#E2 was not run: the plan has more than 1 steps"


async def test_budget_stop_answers_with_the_evidence_so_far() -> None:
    plan = "Plan: a\n#E1 = weather[Paris]\nPlan: b\n#E2 = LLM[Is #E1 warm?]"
    outcome, _, _, _ = await run(plan, "Mild.", limits=Limits(max_llm_calls=2))
    assert outcome.status == "failed" and "2 LLM calls" in outcome.error
    assert "#E1 = weather[Paris]: Paris: 14 C" in outcome.answer
    assert "#E2 = LLM[Is #E1 warm?]: Mild." in outcome.answer


def test_tool_arguments() -> None:
    params = weather.parameters
    assert tool_arguments(params, "Paris") == {"city": "Paris"}
    assert tool_arguments(params, '{"city": "Paris"}') == {"city": "Paris"}
    assert tool_arguments(params, 'city="Paris"') == {"city": "Paris"}
    assert tool_arguments(params, '{"town": "Paris"}') == {"city": '{"town": "Paris"}'}
    assert tool_arguments(compare.parameters, "x") == {"a": "x"}  # the executor says b is missing
    assert tool_arguments(compare.parameters, '{"a": "x", "b": "y"}') == {"a": "x", "b": "y"}


async def test_demo_question_plan_resolves_with_the_demo_tools() -> None:
    demo = [get_tool("get_weather"), get_tool("get_air_quality")]
    plan = "\n".join(f"Plan: look it up\n#E{n} = {tool_name}[{city}]" for n, (tool_name, city)
                     in enumerate([("get_weather", "Paris"), ("get_weather", "Delhi"),
                                   ("get_air_quality", "Paris"), ("get_air_quality", "Delhi")], 1))
    model = ScriptedModel([plan, "Paris."])
    ctx, sink = make_context(model, demo, params=validate_params("rewoo", {}))
    outcome = await execute(ReWOO(), ctx, ReWOO.demo_question)
    assert outcome.status == "succeeded" and len(model.requests) == 2
    assert all(s.status == "ok" for s in sink.of_kind("tool")) and len(sink.of_kind("tool")) == 4
    prompt = solver_prompt(model)
    assert '"temperature_c": 27' in prompt and '"aqi": 198' in prompt  # Delhi: hot, smoky
    assert '"temperature_c": 14' in prompt and '"aqi": 42' in prompt  # Paris: mild, clean
