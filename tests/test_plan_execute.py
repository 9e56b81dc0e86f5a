"""Plan-and-Execute control flow: planner, ReAct executor per step, replanner, solver.

Scripted models drive the real runtime and tools: right for which steps are recorded, with
which roles and parents, and how many LLM calls a fixed task costs; not for whether a real model
follows the prompts (the embedded-model end-to-end run covers that).
"""

from __future__ import annotations

import json

import pytest

from agentlab.paradigms.plan_execute import PlanExecute
from agentlab.paradigms.registry import validate_params
from agentlab.runtime.limits import Limits
from agentlab.runtime.loop import execute
from agentlab.tools.decorator import tool
from tests.scripted_model import ScriptedModel, make_context

TASK = "How much warmer is Paris than Oslo?"
PLAN = ["Get the weather in Paris", "Get the weather in Oslo", "Subtract the temperatures"]


@tool
def temperature(city: str) -> str:
    """The current temperature of a city."""
    return {"paris": "14 C", "oslo": "4 C"}.get(city.lower(), "no data")


def plan(*steps: str) -> str:
    return json.dumps({"steps": list(steps)})


def final(answer: str) -> str:
    return json.dumps({"thought": "done", "action": "final_answer", "action_input": answer})


def act(name: str, args: dict) -> str:
    return json.dumps({"thought": "look it up", "action": name, "action_input": args})


def keep(*steps: str) -> str:
    return json.dumps({"action": "continue", "steps": list(steps), "answer": ""})


def finish(answer: str) -> str:
    return json.dumps({"action": "finish", "steps": [], "answer": answer})


async def run(script, *, models=None, limits=None, **params):
    model = ScriptedModel(script)
    ctx, sink = make_context(model, [temperature], models=models, limits=limits,
                             params=validate_params("plan_execute", params))
    outcome = await execute(PlanExecute(), ctx, TASK)
    return outcome, sink, model


def llm_roles(sink) -> list[str]:
    return [s.role for s in sink.of_kind("llm")]


def items(sink) -> list:
    return [s for s in sink.of_kind("plan") if s.role == "executor"]


def user_text(request: dict) -> str:
    return request["messages"][-1]["content"]


async def test_without_replanning_costs_planner_plus_one_per_step_plus_solver() -> None:
    outcome, sink, model = await run(
        [plan(*PLAN), final("14 C"), final("4 C"), final("10"), "Paris is 10 C warmer."],
        replan=False)
    assert outcome.status == "succeeded" and outcome.answer == "Paris is 10 C warmer."
    assert len(model.requests) == outcome.totals.llm_calls == 5
    assert llm_roles(sink) == ["planner", "executor", "executor", "executor", "solver"]
    (the_plan,) = [s for s in sink.of_kind("plan") if s.role == "planner"]
    assert the_plan.output == PLAN and the_plan.meta["revision"] == 0
    steps = items(sink)
    assert [s.text for s in steps] == PLAN
    assert all(s.parent == the_plan.seq and s.status == "ok" for s in steps)
    assert [s.output for s in steps] == ["14 C", "4 C", "10"]
    executor_llms = [s for s in sink.of_kind("llm") if s.role == "executor"]
    assert [s.parent for s in executor_llms] == [s.seq for s in steps]
    assert model.requests[0]["response_format"]["json_schema"]["name"] == "plan"
    # The first step's executor gets the step as its question; later ones the step first,
    # then what the steps before found.
    assert user_text(model.requests[1]).endswith("Question: Get the weather in Paris")
    third = user_text(model.requests[3])
    assert third.startswith("Question: Subtract the temperatures\n") and TASK in third
    assert "Get the weather in Oslo" in third and "Result: 4 C" in third
    assert "Result: 10" in user_text(model.requests[4])  # the solver sees every result


async def test_executor_uses_tools_and_its_own_model() -> None:
    executor = ScriptedModel([act("temperature", {"city": "Paris"}), final("14 C")],
                             profile_name="cheap")
    outcome, sink, model = await run([plan("Get the weather in Paris")],
                                     models={"executor": executor}, replan=False)
    # A plan of one step that the executor answered needs no solver: its answer is the run's.
    assert outcome.status == "succeeded" and outcome.answer == "14 C"
    assert len(model.requests) == 1 and len(executor.requests) == 2
    (item,) = items(sink)
    (call,) = sink.of_kind("tool")
    assert call.role == "executor" and call.parent == item.seq and call.text == "14 C"
    assert item.output == "14 C"


async def test_replanner_after_each_step_until_it_answers() -> None:
    outcome, sink, model = await run([
        plan(*PLAN), final("14 C"), keep(*PLAN[1:]), final("4 C"), keep(PLAN[2]),
        final("10"), finish("Paris is 10 C warmer than Oslo.")])
    assert outcome.answer == "Paris is 10 C warmer than Oslo."
    assert outcome.totals.llm_calls == 7  # 1 plan + 3 steps + 3 replans, no solver
    assert "solver" not in llm_roles(sink)
    # An unchanged plan is not a revision: still one plan step.
    assert len([s for s in sink.of_kind("plan") if s.role != "executor"]) == 1
    replan = user_text(model.requests[2])
    assert "Result: 14 C" in replan and "Get the weather in Oslo" in replan
    assert model.requests[2]["response_format"]["json_schema"]["name"] == "replan"


async def test_replanner_finishing_early_skips_the_remaining_steps() -> None:
    outcome, sink, _ = await run([plan(*PLAN), final("Paris 14 C, Oslo 4 C"),
                                  finish("10 degrees warmer.")])
    assert outcome.answer == "10 degrees warmer." and outcome.totals.llm_calls == 3
    assert [s.text for s in items(sink)] == PLAN[:1]


async def test_revision_drops_repeated_steps_and_nests_the_new_steps() -> None:
    outcome, sink, _ = await run([
        plan(*PLAN[:2]), final("14 C"), keep("get the weather in paris.", "Look up Oslo"),
        final("4 C"), finish("10 C warmer.")])
    assert outcome.answer == "10 C warmer."
    first, revised = [s for s in sink.of_kind("plan") if s.role != "executor"]
    assert revised.role == "replanner" and revised.meta["revision"] == 1
    assert revised.output == ["Look up Oslo"]
    assert revised.meta["dropped_repeats"] == ["get the weather in paris."]
    step1, step2 = items(sink)
    assert step1.parent == first.seq and step2.parent == revised.seq
    assert step2.text == "Look up Oslo"


async def test_revision_limit_stops_asking_the_replanner() -> None:
    outcome, sink, _ = await run([
        plan("Step A", "Step B"), final("a"), keep("Step C", "Step D"),
        final("c"), final("d"), "done"], max_revisions=1)
    assert outcome.answer == "done"
    # 1 plan + step A + 1 replan (revision 1) + C + D run as planned + solver.
    assert llm_roles(sink) == ["planner", "executor", "replanner", "executor", "executor",
                               "solver"]
    assert [s.text for s in items(sink)] == ["Step A", "Step C", "Step D"]


async def test_text_replies_when_the_server_ignores_the_schema() -> None:
    outcome, _, model = await run([
        "Here is the plan:\n1. Get the weather in Paris\n2. Get the weather in Oslo",
        final("14 C"), "Remaining steps:\n1. Get the weather in Oslo", final("4 C"),
        "Final answer: Paris is 10 C warmer."], structured_plan=False)
    assert outcome.answer == "Paris is 10 C warmer." and outcome.totals.llm_calls == 5
    assert model.requests[0]["response_format"] is None
    assert model.requests[2]["response_format"] is None


async def test_an_unreadable_replan_is_an_error_step_and_the_plan_stays() -> None:
    outcome, sink, _ = await run([plan(*PLAN[:2]), final("14 C"), "Sounds good to me.",
                                  final("4 C"), finish("10 C warmer.")])
    assert outcome.status == "succeeded" and outcome.totals.format_errors == 1
    (error,) = sink.of_kind("error")
    assert error.role == "replanner" and error.meta == {"format_error": True}
    assert "plan stays" in error.text and error.input == "Sounds good to me."
    assert [s.text for s in items(sink)] == PLAN[:2]


async def test_an_empty_plan_is_retried_once_with_the_error() -> None:
    outcome, sink, model = await run([plan(), plan("Get the weather in Paris"), final("14 C"),
                                      "14 C."], replan=False)
    assert outcome.status == "succeeded" and outcome.totals.format_errors == 1
    assert sink.of_kind("error")[0].role == "planner"
    assert user_text(model.requests[1]).startswith("Error: Could not find any plan steps")


async def test_no_plan_after_the_retry_fails_clearly() -> None:
    outcome, sink, _ = await run([plan(), ""])
    assert outcome.status == "failed" and "planner gave no usable plan" in outcome.error
    assert [s.role for s in sink.of_kind("error")][:2] == ["planner", "planner"]
    assert outcome.totals.llm_calls == 2 and not items(sink)


async def test_more_than_seven_steps_are_cut_to_seven() -> None:
    steps = [f"Step {c}" for c in "ABCDEFGHI"]
    outcome, sink, _ = await run([plan(*steps), *[final(c) for c in "ABCDEFG"], "done"],
                                 replan=False)
    assert outcome.totals.llm_calls == 9
    (the_plan,) = [s for s in sink.of_kind("plan") if s.role == "planner"]
    assert the_plan.output == steps[:7] and the_plan.meta["truncated"] == ["Step H", "Step I"]
    assert len(items(sink)) == 7


async def test_planner_and_executor_get_their_examples() -> None:
    plan_examples = [{"role": "user", "content": "What is 12 * 7?"},
                     {"role": "assistant", "content": plan("What is 12 * 7?")}]
    step_examples = [{"role": "user", "content": "Question: What is 2 + 2?"},
                     {"role": "assistant", "content": final("4")}]
    _, _, model = await run([plan(PLAN[0]), act("temperature", {"city": "Paris"}), final("14 C")],
                            replan=False, few_shot=plan_examples, executor_few_shot=step_examples,
                            executor_first_tool_choice="required")
    planner, executor = model.requests[0]["messages"], model.requests[1]["messages"]
    assert planner[1:] == [*plan_examples, {"role": "user", "content": TASK}]
    assert executor[1:3] == step_examples and executor[3]["content"].endswith(PLAN[0])
    # The executor's first turn must act: its schema leaves out final_answer.
    actions = model.requests[1]["response_format"]["json_schema"]["schema"]["properties"]
    assert "final_answer" not in actions["action"]["enum"]


async def test_a_plan_cut_off_mid_json_is_a_format_error_not_a_step() -> None:
    cut = '{"steps": ["What is the weather in Paris?", "Get the weather with get_weather.com.com'
    outcome, sink, model = await run([cut, plan(PLAN[0]), final("14 C")], replan=False)
    assert outcome.answer == "14 C" and outcome.totals.format_errors == 1
    assert "could not be read (cut off or invalid)" in user_text(model.requests[1])
    (the_plan,) = [s for s in sink.of_kind("plan") if s.role == "planner"]
    assert the_plan.output == [PLAN[0]]
    # What makes a cut-off plan rare: each step is bounded, so is their number.
    steps = model.requests[0]["response_format"]["json_schema"]["schema"]["properties"]["steps"]
    assert (steps["items"]["maxLength"], steps["maxItems"]) == (160, 7)


async def test_a_step_that_runs_out_of_iterations_is_recorded_and_the_run_goes_on() -> None:
    outcome, sink, model = await run(
        [plan(*PLAN[:2]), act("temperature", {"city": "Paris"}), final("4 C"), "Oslo is 4 C."],
        replan=False, executor_max_iterations=1)
    assert outcome.status == "succeeded" and outcome.answer == "Oslo is 4 C."
    first, second = items(sink)
    # The step stopped, but its lookup found something: that is the step's result.
    assert first.status == "error"
    assert first.output == ("14 C (the step stopped: reached max_iterations (1) without a "
                            "final answer)")
    assert second.status == "ok"
    assert "Result: 14 C (the step stopped: reached max_it" in user_text(model.requests[3])


async def test_a_one_step_plan_whose_step_stopped_still_asks_the_solver() -> None:
    outcome, sink, model = await run(
        [plan(PLAN[0]), act("temperature", {"city": "Paris"}), "Paris: 14 C."],
        replan=False, executor_max_iterations=1)
    assert outcome.answer == "Paris: 14 C." and llm_roles(sink)[-1] == "solver"
    assert "Result: 14 C (the step stopped" in user_text(model.requests[-1])


async def test_a_step_that_stops_before_finding_anything_says_so() -> None:
    outcome, sink, model = await run(
        [plan(*PLAN[:2]), act("no_such_tool", {}), final("4 C"), "Oslo is 4 C."],
        replan=False, executor_max_iterations=1)
    first, _second = items(sink)
    assert first.status == "error" and first.output.startswith("(not finished: reached max_it")
    assert "Result: (not finished" in user_text(model.requests[3])


async def test_a_run_budget_gives_the_step_results_so_far() -> None:
    outcome, sink, _ = await run([plan(*PLAN), final("14 C"), final("4 C")], replan=False,
                                 limits=Limits(max_llm_calls=3))
    assert outcome.status == "failed" and "3 LLM calls" in outcome.error
    assert [s.status for s in items(sink)] == ["ok", "ok", "error"]  # none left running
    assert items(sink)[2].meta["interrupted"] is True
    assert "Result: 14 C" in outcome.answer and "Result: 4 C" in outcome.answer


@pytest.mark.parametrize("params", [{"max_revisions": -1}, {"executor_mode": "yaml"},
                                    {"replan": "yes"}, {"planner": "big"}])
def test_bad_params_are_rejected(params: dict) -> None:
    with pytest.raises(ValueError, match="invalid parameter for plan_execute"):
        validate_params("plan_execute", params)


def test_defaults_and_demo_metadata() -> None:
    filled = validate_params("plan_execute", {})
    assert filled == {"structured_plan": True, "executor_mode": "json",
                      "executor_max_iterations": 4, "replan": True, "max_revisions": 3,
                      "few_shot": [], "executor_first_tool_choice": "auto",
                      "executor_few_shot": []}
    assert "Paris" in PlanExecute.demo_question and PlanExecute.description
