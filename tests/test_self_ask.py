"""Self-Ask's control flow, driven by a scripted model through the real runtime and tool executor.

A scripted model is right here: these tests check the calls made (how many, with which stop
sequence), what the search tool is asked and how a broken format is recovered — not whether a
real model decomposes questions well.
"""

from __future__ import annotations

import json

import pytest

from agentlab.paradigms.registry import validate_params
from agentlab.paradigms.self_ask import SelfAsk
from agentlab.runtime.limits import Limits
from agentlab.runtime.loop import execute
from agentlab.tools.decorator import tool
from agentlab.tools.registry import get_tool
from tests.scripted_model import ScriptedModel, make_context

FACTS = {"who makes the zephyr x2?": "Altavia Robotics makes the Zephyr X2.",
         "who founded altavia robotics?": "Mira Okonkwo founded Altavia Robotics in 2011."}
QUESTION = "Who founded the company that makes the Zephyr X2?"


@tool
def search(query: str) -> str:
    """Search the knowledge base."""
    return FACTS.get(query.lower(), f"No results for {query!r}.")


@tool
def lookup(term: str) -> str:
    """Look a term up (another answerer, with a differently named parameter)."""
    return f"{term} is a drone."


def follow(question: str) -> str:
    return f"Are follow up questions needed here: Yes.\nFollow up: {question}"


async def run(script, *, tools=(search,), params=None, **kwargs):
    model = ScriptedModel(script)
    ctx, sink = make_context(model, list(tools), params=validate_params("self_ask", params or {}),
                             **kwargs)
    outcome = await execute(SelfAsk(), ctx, QUESTION)
    return outcome, sink, model, ctx


async def test_two_follow_ups_then_the_final_answer() -> None:
    outcome, sink, model, _ = await run([
        follow("Who makes the Zephyr X2?"), "Follow up: Who founded Altavia Robotics?",
        "So the final answer is: Mira Okonkwo"])
    assert outcome.status == "succeeded" and outcome.answer == "Mira Okonkwo"
    assert len(model.requests) == 3 and outcome.totals.llm_calls == 3
    assert all(r["stop"] == ["Intermediate answer:"] for r in model.requests)
    assert [s.role for s in sink.of_kind("llm")] == ["agent"] * 3
    follow_ups = sink.of_kind("message")
    assert [(s.name, s.text, s.parent) for s in follow_ups] == [
        ("follow-up", "Who makes the Zephyr X2?", None),
        ("follow-up", "Who founded Altavia Robotics?", None)]
    assert follow_ups[0].output == "Altavia Robotics makes the Zephyr X2."
    tools = sink.of_kind("tool")
    assert [(s.name, s.input, s.parent) for s in tools] == [
        ("search", {"query": "Who makes the Zephyr X2?"}, follow_ups[0].seq),
        ("search", {"query": "Who founded Altavia Robotics?"}, follow_ups[1].seq)]
    last = model.requests[2]["messages"]
    assert last[0]["role"] == "system" and "So the final answer is:" in last[0]["content"]
    assert last[2] == {"role": "assistant", "content": follow("Who makes the Zephyr X2?")}
    assert last[3] == {"role": "user",
                       "content": "Intermediate answer: Altavia Robotics makes the Zephyr X2."}
    assert last[-1]["content"].startswith("Intermediate answer: Mira Okonkwo")


async def test_markers_are_case_insensitive_and_a_colon_stays_in_the_question() -> None:
    outcome, sink, _, _ = await run(["FOLLOW UP: What is the ratio 3:1 used for?\n"
                                     "intermediate answer:",
                                     "so the final answer is: Mixing."])
    assert outcome.answer == "Mixing."
    assert sink.of_kind("tool")[0].input == {"query": "What is the ratio 3:1 used for?"}


@pytest.mark.parametrize("reply", [
    "Are follow up questions needed here: No.\nParis.",  # no final line
    "The Zephyr X2 is a drone, I think.",  # garbage
])
async def test_broken_format_costs_exactly_one_call_that_asks_for_the_final_line(
        reply: str) -> None:
    outcome, sink, model, ctx = await run([reply, "So the final answer is: Mira Okonkwo"])
    assert outcome.status == "succeeded" and outcome.answer == "Mira Okonkwo"
    assert len(model.requests) == 2 and ctx.totals.format_errors == 1
    (error,) = sink.of_kind("error")
    assert error.meta == {"format_error": True} and error.input == reply
    assert "So the final answer is:" in error.text
    retry = model.requests[1]
    assert retry["stop"] is None
    assert retry["messages"][-2] == {"role": "assistant", "content": reply}
    assert "So the final answer is: <the answer>" in retry["messages"][-1]["content"]
    # On the embedded model the retry's grammar leaves only the final answer.
    assert (retry["response_format"]["follow"], retry["response_format"]["final"]) == (
        False, True)


async def test_still_no_final_line_uses_the_last_line_and_says_so() -> None:
    outcome, sink, model, ctx = await run(["I am not sure.", "It was\nMira Okonkwo\n"])
    assert outcome.status == "succeeded" and outcome.answer == "Mira Okonkwo"
    assert len(model.requests) == 2 and ctx.totals.format_errors == 2
    last_error = sink.of_kind("error")[-1]
    assert "broke the Self-Ask format" in last_error.text and "'Mira Okonkwo'" in last_error.text


async def test_max_follow_ups_then_the_model_is_asked_for_the_final_answer() -> None:
    outcome, sink, model, _ = await run([
        follow("Who makes the Zephyr X2?"), "Follow up: Who founded Altavia Robotics?",
        "So the final answer is: Altavia Robotics' founder"], params={"max_follow_ups": 1})
    assert outcome.answer == "Altavia Robotics' founder" and len(model.requests) == 3
    assert len(sink.of_kind("tool")) == 1 and len(sink.of_kind("message")) == 1
    final_request = model.requests[2]
    assert final_request["stop"] is None
    assert "asked 1 follow-up questions, the most allowed" in \
        final_request["messages"][-1]["content"]


async def test_a_repeated_follow_up_is_not_searched_again() -> None:
    outcome, sink, model, _ = await run([follow("Who makes the Zephyr X2?")] * 3 +
                                        ["So the final answer is: Altavia"])
    assert outcome.status == "succeeded"  # no loop failure: the tool ran once
    assert len(sink.of_kind("tool")) == 1
    assert [s.meta.get("repeated") for s in sink.of_kind("message")] == [None, True, True]
    assert "You asked this before" in model.requests[2]["messages"][-1]["content"]


async def test_llm_answerer_uses_its_own_role_under_the_follow_up() -> None:
    answerer = ScriptedModel(["Altavia Robotics."], profile_name="answerer")
    outcome, sink, model, _ = await run(
        [follow("Who makes the Zephyr X2?"), "So the final answer is: Altavia Robotics"],
        params={"answerer": "llm"}, models={"answerer": answerer})
    assert outcome.answer == "Altavia Robotics" and not sink.of_kind("tool")
    llm = sink.of_kind("llm")
    assert [s.role for s in llm] == ["agent", "answerer", "agent"]
    assert llm[1].parent == sink.of_kind("message")[0].seq
    assert answerer.requests[0]["messages"][-1]["content"] == "Who makes the Zephyr X2?"
    assert model.requests[1]["messages"][-1]["content"] == "Intermediate answer: Altavia Robotics."


async def test_any_text_tool_can_answer() -> None:
    outcome, sink, _, _ = await run([follow("Zephyr X2"), "So the final answer is: a drone"],
                                    tools=[lookup], params={"answerer": "lookup"})
    assert outcome.answer == "a drone"
    assert sink.of_kind("tool")[0].input == {"term": "Zephyr X2"}  # its one text parameter


async def test_an_answerer_the_agent_lacks_fails_clearly() -> None:
    outcome, _, model, _ = await run(["unused"], tools=[lookup])
    assert outcome.status == "failed" and not model.requests
    assert "answerer 'search' is not a tool this agent may use" in outcome.error


async def test_budget_stop_answers_with_the_follow_ups_so_far() -> None:
    outcome, _, _, _ = await run([follow("Who makes the Zephyr X2?"), "Follow up: Who else?"],
                                 limits=Limits(max_llm_calls=2))
    assert outcome.status == "failed" and "2 LLM calls" in outcome.error
    assert "Who makes the Zephyr X2? → Altavia Robotics makes the Zephyr X2." in outcome.answer


def test_params_are_validated() -> None:
    assert validate_params("self_ask", {}) == {"max_follow_ups": 4, "answerer": "search",
                                               "tool_arg": "query", "few_shot": [],
                                               "min_follow_ups": 0}
    with pytest.raises(ValueError, match="max_follow_ups"):
        validate_params("self_ask", {"max_follow_ups": 0})


async def test_examples_come_first_and_each_turn_says_its_shape() -> None:
    examples = [{"role": "user", "content": "Question: Who makes the iPhone?"},
                {"role": "assistant", "content": "So the final answer is: Apple"}]
    outcome, _, model, _ = await run([
        follow("Who makes the Zephyr X2?"), "Follow up: Who founded Altavia Robotics?",
        "So the final answer is: Mira Okonkwo"],
        params={"few_shot": examples, "min_follow_ups": 2, "markers": {"follow_up": ["Frage"]}})
    assert outcome.answer == "Mira Okonkwo"
    assert model.requests[0]["messages"][1:3] == examples
    shapes = [r["response_format"] for r in model.requests]
    assert all(f["type"] == "self_ask" for f in shapes)
    assert shapes[0]["labels"] == {"follow_up": ["Follow up", "Frage"],
                                   "final_answer": ["So the final answer is"]}
    # The first turn opens with "Are follow up questions needed here"; until two follow-ups
    # are answered a turn may only ask (the embedded model's grammar has no final answer).
    assert [(f["first"], f["final"]) for f in shapes] == [(True, False), (False, False),
                                                          (False, True)]


async def test_a_final_answer_before_the_minimum_is_taken_from_a_server_without_grammars(
        ) -> None:
    # Only the embedded model's grammar can hold the model to its follow-ups; elsewhere the
    # answer it insists on is its answer.
    outcome, _, model, _ = await run(["So the final answer is: Mira Okonkwo"],
                                     params={"min_follow_ups": 2})
    assert outcome.answer == "Mira Okonkwo" and len(model.requests) == 1


async def test_demo_question_resolves_by_chained_searches_of_the_knowledge_base() -> None:
    hops = ["Who makes the Zephyr X2?", "Who founded Altavia Robotics?",
            "Where was Mira Okonkwo born?"]
    model = ScriptedModel([follow(hops[0]), *(f"Follow up: {q}" for q in hops[1:]),
                           "So the final answer is: Port Ellery"])
    ctx, sink = make_context(model, [get_tool("search")], params=validate_params("self_ask", {}))
    outcome = await execute(SelfAsk(), ctx, SelfAsk.demo_question)
    assert outcome.answer == "Port Ellery"
    top_titles = [json.loads(s.output["output"])[0]["title"] for s in sink.of_kind("tool")]
    assert top_titles == ["Zephyr X2", "Altavia Robotics", "Mira Okonkwo"]
    assert "born in 1979 in Port Ellery" in model.requests[3]["messages"][-1]["content"]
