"""LATS: the pure search tree, then the control flow driven by scripted models.

Scripted models (one per role: agent, evaluator, reflector, solver) are right for control-flow
tests: which calls are made, in which order, and what the trace looks like. They say nothing
about whether a real model follows the prompts.
"""

from __future__ import annotations

import json
import math

import pytest

from agentlab.paradigms._lats_tree import Node, backpropagate, is_open, select, trajectory_text, uct
from agentlab.paradigms.lats import LATS
from agentlab.paradigms.registry import validate_params
from agentlab.runtime.limits import Limits
from agentlab.runtime.loop import execute
from agentlab.tools.decorator import tool
from tests.scripted_model import ScriptedModel, make_context

# ---------------------------------------------------------------------------- the pure tree


def test_uct_prefers_unvisited_children() -> None:
    root = Node(visits=3, value=5.0)
    root.add(visits=2, value=9.0)
    fresh = root.add()
    assert uct(fresh, 1.0) == math.inf
    assert select(root, 1.0, max_depth=5) is fresh


def test_uct_formula_balances_value_and_exploration() -> None:
    root = Node(visits=10)
    strong = root.add(visits=5, value=6.0)  # 0.6 + sqrt(ln 10 / 5) = 1.279
    rare = root.add(visits=2, value=4.0)  # 0.4 + sqrt(ln 10 / 2) = 1.473
    assert uct(strong, 1.0) == pytest.approx(0.6 + math.sqrt(math.log(10) / 5))
    assert select(root, 1.0, max_depth=5) is rare
    assert select(root, 0.0, max_depth=5) is strong  # no exploration: the best value wins


def test_select_descends_and_skips_closed_branches() -> None:
    root = Node(visits=3)
    done = root.add(visits=1, value=10.0, terminal=True, answer="x")
    branch = root.add(visits=2, value=2.0)
    leaf = branch.add(visits=1, value=2.0)
    assert select(root, 1.0, max_depth=5) is leaf
    assert select(root, 1.0, max_depth=2) is None  # the leaf is at the depth limit
    assert not is_open(done, 5)


def test_backpropagate_keeps_running_means() -> None:
    root = Node()
    a = root.add()
    a1 = a.add()
    b = root.add()
    backpropagate(a1, 6.0)
    backpropagate(a1, 3.0)
    assert backpropagate(b, 9.0) == [root, b]
    assert (a1.visits, a1.value) == (2, 4.5)
    assert (a.visits, a.value) == (2, 4.5)
    assert (root.visits, root.value) == (3, 6.0)


def test_trajectory_text_shows_actions_and_observations() -> None:
    root = Node()
    a = root.add(thought="look it up", action="population", action_input={"city": "Paris"},
                 observation="2.1 million")
    done = a.add(action="final_answer", answer="2.1 million")
    assert trajectory_text(done, "How many?") == (
        'Question: How many?\nThought: look it up\nAction: population {"city": "Paris"}\n'
        "Observation: 2.1 million\nFinal answer: 2.1 million")


# ---------------------------------------------------------------------------- the search


@tool
def population(city: str) -> str:
    """Look up the population of a city."""
    return {"paris": "Paris has 2.1 million people.", "lyon": "Lyon has 0.5 million people."}.get(
        city.lower(), "No results")


def act(city: str) -> str:
    return json.dumps({"thought": f"look up {city}", "action": "population",
                       "action_input": {"city": city}})


def final(answer: str) -> str:
    return json.dumps({"thought": "done", "action": "final_answer", "action_input": answer})


async def search(agent, evaluator, *, reflector=(), solver=(), limits=None, **params):
    models = {name: ScriptedModel(script) for name, script in
              {"evaluator": evaluator, "reflector": reflector, "solver": solver}.items()}
    agent_model = ScriptedModel(agent)
    ctx, sink = make_context(agent_model, [population], models=models,
                             params=validate_params("lats", params),
                             limits=limits or Limits(max_llm_calls=50, max_steps=200))
    outcome = await execute(LATS(), ctx, "How many people live in Paris?")
    return outcome, sink, agent_model, models, ctx


def nodes(sink):
    return sink.of_kind("node")


async def test_one_iteration_makes_n_expansions_and_n_evaluations() -> None:
    outcome, sink, agent, models, _ = await search(
        [act("Lyon"), act("Paris"), act("Berlin")], ["Score: 3", "Score: 7", "Score: 5"],
        solver=["Paris has 2.1 million people."], max_iterations=1)
    assert outcome.status == "succeeded" and outcome.answer == "Paris has 2.1 million people."
    assert len(agent.requests) == 3 and len(models["evaluator"].requests) == 3
    assert outcome.totals.llm_calls == 7  # + one solver call: no candidate gave an answer
    assert all(r["temperature"] == 0.8 for r in agent.requests)
    schema = agent.requests[0]["response_format"]["json_schema"]["schema"]["properties"]
    # Narrowed to this agent: its one tool or the answer (the generic schema let SmolLM2 call
    # a tool named "Observation: ...").
    assert schema["action"] == {"enum": ["population", "final_answer"]}
    # Each evaluation: a line of reasoning, then a whole score from 0 to 10 (a grammar on the
    # embedded model), and short.
    judged = models["evaluator"].requests
    assert all(r["response_format"] == {"type": "scored", "low": 0, "high": 10}
               and r["max_tokens"] == 96 for r in judged)
    root, *children = nodes(sink)
    assert root.parent is None and root.meta["visits"] == 3 and root.meta["value"] == 5.0
    assert [c.parent for c in children] == [root.seq] * 3
    assert [c.meta["value"] for c in children] == [3.0, 7.0, 5.0]
    assert all(c.status == "ok" and c.meta["visits"] == 1 and c.meta["depth"] == 1
               for c in children)
    assert children[1].meta["action_input"] == {"city": "Paris"}
    # Each candidate's llm and tool steps are nested under its node.
    for child in children:
        under = [s.kind for s in sink.steps if s.parent == child.seq]
        assert under == ["llm", "tool", "llm"]
    # The solver answers from the best-scored node, named by the thought step.
    assert "2.1 million people" in json.dumps(models["solver"].requests[0]["messages"])
    chosen = sink.of_kind("thought")[-1]
    assert chosen.meta["trajectory"] == [root.seq, children[1].seq]


async def test_a_solved_answer_stops_the_search() -> None:
    outcome, sink, agent, models, _ = await search(
        [act("Paris"), final("2.1 million")], ["Score: 6", "Correct. Score: 10"])
    assert outcome.status == "succeeded" and outcome.answer == "2.1 million"
    assert len(agent.requests) == 2 and len(models["evaluator"].requests) == 2
    assert not models["solver"].requests and not sink.of_kind("reflection")
    solved = nodes(sink)[-1]
    assert solved.meta["solved"] and solved.meta["terminal"]
    assert solved.meta["action"] == "final_answer"
    # The final answer was judged with the final-answer prompt, on the whole trajectory.
    judged = models["evaluator"].requests[1]["messages"]
    assert "finished attempt" in judged[0]["content"] and "2.1 million" in judged[1]["content"]


async def test_a_reflection_on_a_failed_answer_goes_into_later_prompts() -> None:
    outcome, sink, agent, models, ctx = await search(
        [act("Paris"), final("3 million"), final("2.1 million")],
        ["Score: 5", "Wrong. Score: 2", "Score: 10"],
        reflector=["Answer from the observation, not from memory."], n_candidates=2)
    assert outcome.answer == "2.1 million" and ctx.totals.reflections == 1
    reflection = sink.of_kind("reflection")[0]
    failed = nodes(sink)[2]
    assert reflection.parent == failed.seq and reflection.role == "reflector"
    assert "3 million" in models["reflector"].requests[0]["messages"][1]["content"]
    assert "not from memory" not in agent.requests[1]["messages"][0]["content"]
    assert "not from memory" in agent.requests[2]["messages"][0]["content"]
    # The second iteration expanded the open node: its trajectory is in the prompt.
    assert "Paris has 2.1 million people." in agent.requests[2]["messages"][-1]["content"]
    assert nodes(sink)[-1].parent == nodes(sink)[1].seq


async def test_returns_the_best_trajectory_not_the_last() -> None:
    outcome, sink, agent, models, _ = await search(
        [final("2 million"), act("Paris"), final("20 million"), act("Lyon")],
        ["Score: 8", "Score: 6", "Score: 4", "Score: 2"],
        reflector=["Check the number.", "Use the observation."], n_candidates=2,
        max_iterations=2)
    assert outcome.answer == "2 million"
    root, first, second, deep_answer, deep_act = nodes(sink)
    assert [deep_answer.parent, deep_act.parent] == [second.seq, second.seq]
    assert (second.meta["visits"], second.meta["value"]) == (3, 4.0)
    assert (root.meta["visits"], root.meta["value"]) == (4, 5.0)
    assert sink.of_kind("thought")[-1].meta["trajectory"] == [root.seq, first.seq]
    assert len(sink.of_kind("reflection")) == 2  # one per iteration
    assert not models["solver"].requests


async def test_unreadable_candidates_and_scores_are_error_steps() -> None:
    outcome, sink, agent, models, ctx = await search(
        ["I think about two million.", act("Paris")], ["Thought 1: that looks useful."],
        solver=["2.1 million"], n_candidates=2, max_iterations=1)
    assert outcome.status == "succeeded" and ctx.totals.format_errors == 2
    assert len(models["evaluator"].requests) == 1  # an unreadable candidate is not scored
    _, broken, unscored = nodes(sink)
    format_error, value_error = sink.of_kind("error")
    assert broken.status == "error" and format_error.parent == broken.seq
    assert format_error.meta == {"format_error": True}
    assert value_error.parent == unscored.seq and value_error.meta == {"value_error": True}
    assert "no usable score" in value_error.text
    assert unscored.meta["value_error"] and unscored.meta["value"] == 0.0
    assert unscored.meta["visits"] == 1 and unscored.meta["score"] is None


async def test_identical_sibling_calls_run_the_tool_once() -> None:
    outcome, sink, _, _, ctx = await search(
        [act("Paris")] * 3, ["Score: 5"] * 3, solver=["2.1 million"], max_iterations=1)
    assert outcome.status == "succeeded"  # three equal calls in a row are not a loop here
    tools = sink.of_kind("tool")
    assert ctx.totals.tool_calls == 1 and len(tools) == 3
    assert [t.meta.get("cached", False) for t in tools] == [False, True, True]
    assert all(t.text == "Paris has 2.1 million people." for t in tools)


async def test_a_budget_stop_answers_with_the_best_answer_so_far() -> None:
    outcome, _, _, _, _ = await search(
        [final("2 million"), act("Paris")], ["Score: 7"], limits=Limits(max_llm_calls=2))
    assert outcome.status == "failed" and "2 LLM calls" in outcome.error
    assert "2 million" in outcome.answer and "scored 7/10" in outcome.answer
