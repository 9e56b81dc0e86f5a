"""Multi-Agent's three modes, driven by scripted models (one per member role) and real tools.

Scripted models are right for control-flow tests: which member speaks when, what each one is
shown, how the steps nest. They say nothing about whether a real model follows the prompts.
"""

from __future__ import annotations

import json

import pytest

from agentlab.paradigms._multi_agent_modes import majority, read_route, vote_key
from agentlab.paradigms.multi_agent import MultiAgent
from agentlab.paradigms.parsing import ParseError
from agentlab.paradigms.registry import validate_params
from agentlab.runtime.limits import Limits
from agentlab.runtime.loop import execute
from agentlab.runtime.scopes import AgentSpec
from agentlab.tools.decorator import tool
from tests.scripted_model import ScriptedModel, make_context

TASK = "Which city is bigger, Paris or Lyon?"


@tool
def population(city: str) -> str:
    """Look up the population of a city."""
    return {"paris": "Paris has 2.1 million people.", "lyon": "Lyon has 0.5 million people."}.get(
        city.lower(), "No results")


def act(city: str) -> str:
    return json.dumps({"thought": "look it up", "action": "population",
                       "action_input": {"city": city}})


def final(answer: str) -> str:
    return json.dumps({"thought": "done", "action": "final_answer", "action_input": answer})


def inline(*names: str, tools: bool = False) -> list[dict]:
    return [{"name": n, "instructions": f"You are {n}, a careful analyst.", "tools": tools}
            for n in names]


async def team(scripts: dict[str, list], agents: dict | None = None, **params):
    models = {role: ScriptedModel(script) for role, script in scripts.items()}
    ctx, sink = make_context(ScriptedModel([]), [population], models=models,
                             params=validate_params("multi_agent", params),
                             limits=Limits(max_llm_calls=50, max_steps=200))
    ctx.agents = agents or {}
    outcome = await execute(MultiAgent(), ctx, TASK)
    return outcome, sink, models


def messages(sink):
    return sink.of_kind("message")


# ---------------------------------------------------------------------------- debate


async def test_debate_two_members_two_rounds_and_a_judge() -> None:
    outcome, sink, models = await team({
        "Ann": ["Paris looks bigger.\nFinal answer: Paris", "I keep it.\nFinal answer: Paris"],
        "Bob": ["Final answer: Lyon", "Ann is right.\nFinal answer: Paris"],
        "judge": ["Both agree in the end.\nFinal answer: Paris"],
    }, members=inline("Ann", "Bob"))
    assert outcome.status == "succeeded" and outcome.answer == "Paris"
    assert outcome.totals.llm_calls == 5
    msgs = messages(sink)
    assert [(m.role, m.name) for m in msgs] == [
        ("Ann", "round 1"), ("Bob", "round 1"), ("Ann", "round 2"), ("Bob", "round 2"),
        ("judge", "verdict")]
    assert all(m.status == "ok" for m in msgs) and msgs[3].text.endswith("Final answer: Paris")
    for m in msgs:  # each member's llm call is nested under its message, in its own role
        (llm,) = [s for s in sink.steps if s.parent == m.seq]
        assert llm.kind == "llm" and llm.role == m.role
    # Round 2 shows each member its own answer and the others' latest ones.
    bob_round2 = models["Bob"].requests[1]["messages"][-1]["content"]
    assert "Ann: Paris looks bigger." in bob_round2 and "Final answer: Lyon" in bob_round2
    assert models["Ann"].requests[0]["messages"][0]["content"].startswith("You are Ann")
    assert "Ann: Paris\n\nBob: Paris" in models["judge"].requests[0]["messages"][1]["content"]


async def test_majority_vote_needs_no_judge() -> None:
    outcome, sink, models = await team({
        "A": ["Final answer: Paris"], "B": ["final answer: paris."], "C": ["Final answer: Lyon"],
    }, members=inline("A", "B", "C"), rounds=1, decide="majority")
    assert outcome.answer == "Paris" and outcome.totals.llm_calls == 3
    vote = sink.of_kind("evaluation")[0]
    assert vote.name == "majority vote" and vote.output == {"votes": {"paris": 2, "lyon": 1}}


async def test_a_tied_vote_goes_to_the_judge() -> None:
    outcome, sink, _ = await team({
        "A": ["Final answer: Paris"], "B": ["Final answer: Lyon"],
        "judge": ["Paris has more people.\nFinal answer: Paris"],
    }, members=inline("A", "B"), rounds=1, decide="majority")
    assert outcome.answer == "Paris" and outcome.totals.llm_calls == 3
    assert "tied" in sink.of_kind("evaluation")[0].text
    assert messages(sink)[-1].role == "judge"


def test_vote_helpers() -> None:
    assert vote_key("Thinking...\n**Final Answer:** 2.1 Million.") == "2.1 million"
    assert majority({"a": "x", "b": "y"}) == (None, {"x": 1, "y": 1})


async def test_default_debate_members_use_tools_in_react_sub_runs() -> None:
    outcome, sink, models = await team({
        "Optimist": [act("Paris"), final("Paris"), final("Paris")],
        "Skeptic": [final("Lyon"), act("Lyon"), final("Paris")],
        "judge": ["Final answer: Paris"],
    })
    assert outcome.answer == "Paris"
    msgs = messages(sink)
    assert [m.role for m in msgs] == ["Optimist", "Skeptic", "Optimist", "Skeptic", "judge"]
    tool_step = sink.of_kind("tool")[0]
    assert tool_step.parent == msgs[0].seq and tool_step.role == "Optimist"
    assert "Skeptic" in models["Skeptic"].requests[0]["messages"][0]["content"]


# ---------------------------------------------------------------------------- pipeline


async def test_pipeline_passes_each_output_to_the_next_stage() -> None:
    outcome, sink, models = await team({
        "researcher": ["Paris: 2.1 million; Lyon: 0.5 million."],
        "writer": ["Paris is bigger (2.1 vs 0.5 million)."],
        "reviewer": ["Paris is bigger: 2.1 million people against 0.5 million."],
    }, members=inline("researcher", "writer", "reviewer"), mode="pipeline")
    assert outcome.answer == "Paris is bigger: 2.1 million people against 0.5 million."
    assert outcome.totals.llm_calls == 3
    assert models["researcher"].requests[0]["messages"][-1]["content"] == TASK
    to_writer = models["writer"].requests[0]["messages"][-1]["content"]
    assert "(researcher)" in to_writer and "Lyon: 0.5 million" in to_writer
    assert "2.1 vs 0.5" in models["reviewer"].requests[0]["messages"][-1]["content"]
    assert [m.name for m in messages(sink)] == ["stage 1", "stage 2", "stage 3"]


async def test_a_member_out_of_iterations_does_not_stop_the_pipeline() -> None:
    outcome, sink, _ = await team({
        "researcher": [act("Paris"), act("Lyon"), act("Rome"), act("Oslo")],
        "writer": ["Paris is bigger."],
    }, members=[*inline("researcher", tools=True), *inline("writer")], mode="pipeline")
    assert outcome.status == "succeeded" and outcome.answer == "Paris is bigger."
    first = messages(sink)[0]
    assert first.status == "error" and "gave no answer" in first.text
    assert any(s.kind == "error" and s.parent == first.seq for s in sink.steps)


async def test_an_agent_member_runs_as_a_nested_react_sub_run() -> None:
    helper = AgentSpec(name="Helper", paradigm="react", params={"mode": "json"},
                       system_prompt="You answer questions about cities.")
    outcome, sink, models = await team(
        {"analyst": [act("Paris"), final("Paris, with 2.1 million people.")]},
        agents={"Helper": helper}, mode="pipeline",
        members=[{"name": "analyst", "agent": "Helper"}])
    assert outcome.answer == "Paris, with 2.1 million people."
    (msg,) = messages(sink)
    assert msg.role == "analyst" and msg.text == outcome.answer
    nested = [s for s in sink.steps if s.parent == msg.seq]
    assert [s.kind for s in nested if s.kind != "thought"] == ["llm", "tool", "llm"]
    assert {s.role for s in nested} == {"analyst"}
    system = models["analyst"].requests[0]["messages"][0]["content"]
    assert system.startswith("You answer questions about cities.")
    assert models["analyst"].requests[0]["response_format"]["json_schema"]["name"] == "react_step"


async def test_a_member_naming_a_missing_agent_fails_clearly() -> None:
    outcome, sink, _ = await team({}, mode="pipeline",
                                  members=[{"name": "analyst", "agent": "Nobody"}])
    assert outcome.status == "failed"
    assert "member analyst: no agent named Nobody" in outcome.error
    assert not messages(sink)


# ---------------------------------------------------------------------------- supervisor


def route(next_: str, instruction: str = "", answer: str = "") -> str:
    return json.dumps({"next": next_, "instruction": instruction, "answer": answer})


async def test_supervisor_routes_to_workers_until_finish() -> None:
    outcome, sink, models = await team({
        "supervisor": [route("researcher", "Find both populations."),
                       route("FINISH", answer="Paris is bigger.")],
        "researcher": ["Paris 2.1 million, Lyon 0.5 million."],
    }, members=inline("researcher", "writer"), mode="supervisor")
    assert outcome.answer == "Paris is bigger." and outcome.totals.llm_calls == 3
    (msg,) = messages(sink)
    assert (msg.role, msg.name, msg.meta["instruction"]) == (
        "researcher", "turn 1", "Find both populations.")
    assert "Find both populations." in models["researcher"].requests[0]["messages"][-1]["content"]
    second = models["supervisor"].requests[1]
    assert "Paris 2.1 million, Lyon 0.5 million." in second["messages"][1]["content"]
    enum = second["response_format"]["json_schema"]["schema"]["properties"]["next"]["enum"]
    assert enum == ["researcher", "writer", "FINISH"]


async def test_supervisor_turn_limit_answers_with_the_last_output() -> None:
    outcome, sink, _ = await team({
        "supervisor": [route("researcher", "Look again.")] * 2,
        "researcher": ["Paris 2.1 million.", "Still Paris 2.1 million."],
    }, members=inline("researcher"), mode="supervisor", max_turns=2)
    assert outcome.status == "succeeded" and outcome.answer == "Still Paris 2.1 million."
    assert outcome.totals.llm_calls == 4
    (limit,) = sink.of_kind("error")
    assert limit.meta == {"turn_limit": True} and "max_turns (2)" in limit.text


async def test_unknown_worker_is_an_error_the_router_is_told_about() -> None:
    outcome, sink, models = await team({
        "supervisor": ["Next: ghost\nInstruction: haunt", route("FINISH", answer="Paris")],
    }, members=inline("researcher", "writer"), mode="supervisor", max_turns=2)
    assert outcome.answer == "Paris"
    (error,) = sink.of_kind("error")
    assert error.meta == {"unknown_worker": True}
    assert "'ghost' is not a worker. Valid names: researcher, writer or FINISH" in error.text
    assert "Valid names: researcher, writer" in models["supervisor"].requests[1]["messages"][1][
        "content"]


async def test_turn_limit_without_any_worker_output_fails_the_run() -> None:
    outcome, sink, _ = await team({"supervisor": ["I am not sure."]},
                                  members=inline("researcher"), mode="supervisor", max_turns=1)
    assert outcome.status == "failed" and "without any worker answering" in outcome.error
    assert sink.of_kind("error")[0].meta == {"format_error": True}


def test_read_route_is_tolerant() -> None:
    assert read_route('```json\n{"next": "writer", "instruction": "draft"}\n```').next == "writer"
    text = read_route('Next: "FINISH"\nAnswer: Paris is bigger.')
    assert (text.next, text.answer) == ("FINISH", "Paris is bigger.")
    with pytest.raises(ParseError, match="names no next worker"):
        read_route("Let the researcher do it.")
