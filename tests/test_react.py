"""ReAct in its three modes, driven by scripted models through the real runtime and tools."""

from __future__ import annotations

import asyncio
import json

import pytest

from agentlab.llm.errors import EndpointUnreachable
from agentlab.paradigms.react import ReAct
from agentlab.paradigms.registry import validate_params
from agentlab.runtime.context import Approval
from agentlab.runtime.limits import Limits
from agentlab.runtime.loop import execute
from agentlab.tools.decorator import tool
from agentlab.tools.executor import ToolPolicy
from tests.scripted_model import ScriptedModel, call, make_context, reply
from tests.waiting import await_until


@tool
def population(city: str) -> str:
    """Look up the population of a city."""
    return {"paris": "Paris has 2.1 million people.", "lyon": "Lyon has 0.5 million people."}.get(
        city.lower(), "No results")


@tool
async def slow(label: str) -> str:
    """Wait 0.3 s, then echo the label."""
    await asyncio.sleep(0.3)
    return f"done {label}"


@tool
async def nap(seconds: float) -> str:
    """Sleep for a while."""
    await asyncio.sleep(seconds)
    return "rested"


TOOLS = [population, slow, nap]


def act(mode: str, name: str, args: dict) -> object:
    """The scripted model's reply for "call `name` with `args`" in `mode`."""
    if mode == "function_calling":
        return reply("", call(name, args))
    if mode == "text":
        return f"Thought: I should look it up.\nAction: {name}\nAction Input: {json.dumps(args)}"
    return json.dumps({"thought": "I should look it up.", "action": name, "action_input": args})


def final(mode: str, answer: str) -> object:
    if mode == "function_calling":
        return reply(answer)
    if mode == "text":
        return f"Thought: I now know the final answer\nFinal Answer: {answer}"
    return json.dumps({"thought": "done", "action": "final_answer", "action_input": answer})


async def run(mode: str, script, *, tools=TOOLS, reflector: str = "none", **kwargs):
    model = ScriptedModel(script)
    params = validate_params("react", {"mode": mode, "reflector": reflector})
    ctx, sink = make_context(model, tools, params=params, **kwargs)
    outcome = await execute(ReAct(), ctx, "How many people live in Paris?")
    return outcome, sink, model, ctx


MODES = ["function_calling", "text", "json"]


@pytest.mark.parametrize("mode", MODES)
async def test_tool_call_then_answer(mode: str) -> None:
    outcome, sink, model, _ = await run(mode, [act(mode, "population", {"city": "Paris"}),
                                               final(mode, "2.1 million")])
    assert outcome.status == "succeeded" and outcome.answer == "2.1 million"
    steps = sink.steps
    assert [s.seq for s in steps] == list(range(1, len(steps) + 1))
    kinds = [s.kind for s in steps if s.kind != "thought"]
    assert kinds == ["llm", "tool", "llm", "final"]
    assert all(s.parent is None for s in steps)
    assert sink.of_kind("tool")[0].text == "Paris has 2.1 million people."
    # The observation went back to the model.
    assert "2.1 million people" in json.dumps(model.requests[1]["messages"])
    if mode == "text":
        assert model.requests[0]["stop"] == ["Observation:"]
        assert "population" in model.requests[0]["messages"][0]["content"]
    if mode == "json":
        assert model.requests[0]["response_format"]["json_schema"]["name"] == "react_step"
    if mode == "function_calling":
        assert model.requests[0]["tools"][0]["function"]["name"] == "population"
        assert model.requests[1]["messages"][-1]["role"] == "tool"


async def test_function_calls_in_one_reply_run_concurrently() -> None:
    script = [reply("Both at once.", call("slow", {"label": "a"}), call("slow", {"label": "b"})),
              reply("a and b")]
    outcome, sink, model, _ = await run("function_calling", script)
    assert outcome.status == "succeeded"
    a, b = sink.of_kind("tool")
    assert a.started_at < b.started_at + b.duration_ms / 1000
    assert b.started_at < a.started_at + a.duration_ms / 1000  # the two calls overlap
    assert sink.of_kind("thought")[0].text == "Both at once."
    tool_messages = [m for m in model.requests[1]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == ["done a", "done b"]


@pytest.mark.parametrize("mode", ["text", "json"])
async def test_parse_error_then_recovery(mode: str) -> None:
    outcome, sink, model, ctx = await run(mode, ["I think it is big.",
                                                 act(mode, "population", {"city": "Paris"}),
                                                 final(mode, "2.1 million")])
    assert outcome.status == "succeeded" and ctx.totals.format_errors == 1
    error = sink.of_kind("error")[0]
    assert error.meta == {"format_error": True}
    assert model.requests[1]["messages"][-1]["content"].startswith("Observation: Error:")


@pytest.mark.parametrize("mode", MODES)
async def test_unknown_tool_then_recovery(mode: str) -> None:
    outcome, sink, model, _ = await run(mode, [act(mode, "teleport", {"to": "Paris"}),
                                               act(mode, "population", {"city": "Paris"}),
                                               final(mode, "2.1 million")])
    assert outcome.status == "succeeded"
    bad, good = sink.of_kind("tool")
    assert bad.status == "error" and "teleport" in bad.text and good.status == "ok"


async def test_malformed_function_arguments_then_recovery() -> None:
    broken = call("population", raw='{"city": "Par', error="Unterminated string")
    outcome, sink, model, ctx = await run("function_calling", [
        reply("", broken), reply("", call("population", {"city": "Paris"})), reply("2.1 million")])
    assert outcome.status == "succeeded" and ctx.totals.format_errors == 1
    tool_message = model.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == broken.id
    assert "not valid JSON" in tool_message["content"]
    assert len(sink.of_kind("tool")) == 1


@pytest.mark.parametrize("mode", MODES)
async def test_llm_call_limit_gives_a_partial_answer(mode: str) -> None:
    outcome, sink, _, _ = await run(mode, [act(mode, "population", {"city": "Paris"}),
                                           act(mode, "population", {"city": "Lyon"})],
                                    limits=Limits(max_llm_calls=2))
    assert outcome.status == "failed" and "2 LLM calls" in outcome.error
    assert "2.1 million" in outcome.answer and "0.5 million" in outcome.answer
    assert sink.steps[-1].kind == "final" and "2.1 million" in sink.steps[-1].text


async def test_step_limit_gives_a_partial_answer() -> None:
    script = [act("text", "population", {"city": "Paris"})] * 1 + [
        act("text", "population", {"city": "Lyon"})]
    outcome, _, _, _ = await run("text", script, limits=Limits(max_steps=4))
    assert outcome.status == "failed" and "4 steps" in outcome.error
    assert "2.1 million" in outcome.answer


async def test_total_timeout_gives_a_partial_answer() -> None:
    script = [act("function_calling", "population", {"city": "Paris"}),
              act("function_calling", "nap", {"seconds": 5})]
    outcome, sink, _, _ = await run("function_calling", script,
                                    limits=Limits(total_timeout_s=0.5))
    assert outcome.status == "timed_out" and "2.1 million" in outcome.answer
    assert sink.steps[-1].kind == "final" and sink.statuses[-1][0] == "timed_out"


@pytest.mark.parametrize("mode", MODES)
async def test_loop_detection_fails_naming_the_tool(mode: str) -> None:
    outcome, sink, _, _ = await run(mode, [act(mode, "population", {"city": "Rome"})] * 3)
    assert outcome.status == "failed"
    assert "population" in outcome.error and "3 times" in outcome.error
    assert len(sink.of_kind("tool")) == 2


async def test_loop_with_rule_reflector_becomes_a_reflection() -> None:
    same = act("function_calling", "population", {"city": "Rome"})
    outcome, sink, model, ctx = await run("function_calling", [same, same, same, reply("unknown")],
                                          reflector="rule")
    assert outcome.status == "succeeded" and outcome.answer == "unknown"
    rules = [s.meta["rule"] for s in sink.of_kind("reflection")]
    assert rules == ["empty_result", "repeated_action", "loop"]
    assert ctx.totals.reflections == 3
    assert "same arguments" in model.requests[3]["messages"][-1]["content"]
    assert all(s.role == "reflector" for s in sink.of_kind("reflection"))


@pytest.mark.parametrize("mode", MODES)
async def test_rule_reflector_feeds_its_suggestion_back(mode: str) -> None:
    outcome, sink, model, _ = await run(mode, [act(mode, "population", {"city": "Atlantis"}),
                                               final(mode, "unknown")], reflector="rule")
    assert outcome.status == "succeeded"
    kinds = [s.kind for s in sink.steps if s.kind != "thought"]
    assert kinds == ["llm", "tool", "reflection", "llm", "final"]
    assert "Relax the query" in json.dumps(model.requests[1]["messages"][-1])


async def test_llm_reflector_uses_its_role_and_falls_back_on_bad_json() -> None:
    reflector = ScriptedModel(["not json at all"], profile_name="judge")
    outcome, sink, _, _ = await run(
        "function_calling", [act("function_calling", "population", {"city": "Atlantis"}),
                             reply("unknown")],
        reflector="llm", models={"reflector": reflector})
    assert outcome.status == "succeeded"
    (reflection,) = sink.of_kind("reflection")
    assert reflection.meta["rule"] == "empty_result" and "fallback" in reflection.meta
    assert [s.role for s in sink.of_kind("llm")] == ["agent", "reflector", "agent"]


async def test_cancel_while_a_tool_sleeps() -> None:
    model = ScriptedModel([act("function_calling", "nap", {"seconds": 5})])
    ctx, sink = make_context(model, TOOLS, params=validate_params("react", {}))
    task = asyncio.create_task(execute(ReAct(), ctx, "q"))
    await await_until(lambda: sink.of_kind("tool"), message="the tool call is under way")
    ctx.cancel()
    outcome = await asyncio.wait_for(task, 2)
    assert outcome.status == "cancelled"
    assert sink.steps[-1].kind == "final" and sink.statuses[-1][0] == "cancelled"


async def test_unreachable_model_fails_with_a_readable_error_step() -> None:
    outcome, sink, _, _ = await run("function_calling", [
        EndpointUnreachable("Cannot reach the model server at http://127.0.0.1:9/v1")])
    assert outcome.status == "failed" and "Cannot reach" in outcome.error
    assert sink.kinds() == ["llm", "error", "final"]
    assert "Cannot reach" in sink.of_kind("error")[0].text


@pytest.mark.parametrize("approved", [True, False])
async def test_approval(approved: bool) -> None:
    async def approver(step):
        return Approval(approved, reason="" if approved else "not today")

    outcome, sink, model, _ = await run(
        "function_calling", [act("function_calling", "population", {"city": "Paris"}),
                             reply("done")],
        approver=approver, policies={"population": ToolPolicy(needs_approval=True)})
    assert outcome.status == "succeeded"
    assert sink.of_kind("approval")[0].meta["approved"] is approved
    observation = model.requests[1]["messages"][-1]["content"]
    if approved:
        assert observation == "Paris has 2.1 million people."
    else:
        assert observation == "Error: the user denied this call: not today"


async def test_function_calling_through_the_real_client_and_http(fake_llm, fake_profile) -> None:
    from agentlab.llm.client import OpenAIChatModel
    from tests.fake_openai import Reply

    fake_llm.script(Reply(tool_calls=[("population", '{"city": "Paris"}')]),
                    Reply(text="About 2.1 million."))
    ctx, sink = make_context(OpenAIChatModel(fake_profile), TOOLS,
                             params=validate_params("react", {}))
    outcome = await execute(ReAct(), ctx, "How many people live in Paris?")
    assert outcome.status == "succeeded" and outcome.answer == "About 2.1 million."
    assert sink.kinds() == ["llm", "tool", "llm", "final"]
    assert sink.text_of(3) == "About 2.1 million."  # streamed under the second llm step
    second = fake_llm.requests[1]["messages"]
    assert second[-1]["role"] == "tool" and second[-1]["content"] == "Paris has 2.1 million people."
    assert outcome.totals.cost_usd > 0 and outcome.totals.tokens_in == 20


async def test_an_empty_reply_is_a_format_error_not_an_answer() -> None:
    outcome, sink, model, ctx = await run("function_calling", [reply(""), reply("2.1 million")])
    assert outcome.answer == "2.1 million" and ctx.totals.format_errors == 1
    assert "reply was empty" in model.requests[1]["messages"][-1]["content"]


async def run_required(mode: str, script):
    """A ReAct run whose first reply must call a tool (first_tool_choice 'required')."""
    model = ScriptedModel(script)
    params = validate_params("react", {"mode": mode, "first_tool_choice": "required"})
    ctx, sink = make_context(model, TOOLS, params=params)
    outcome = await execute(ReAct(), ctx, "How many people live in Paris?")
    return outcome, sink, model


async def test_a_json_turn_that_must_act_offers_no_final_answer_then_the_next_does() -> None:
    outcome, _, model = await run_required("json", [act("json", "population", {"city": "Paris"}),
                                                    final("json", "2.1 million")])
    assert outcome.answer == "2.1 million"
    first, second = (r["response_format"]["json_schema"]["schema"]["properties"]["action"]
                     for r in model.requests)
    assert first == {"enum": ["population", "slow", "nap"]}
    assert second == {"enum": ["population", "slow", "nap", "final_answer"]}
    # The answer's text may not be empty: a small model under the schema's grammar otherwise
    # closes the quotes at once.
    answer = model.requests[1]["response_format"]["json_schema"]["schema"]["properties"][
        "action_input"]["anyOf"][-1]
    # Bounded, so that a rambling answer is closed before max_tokens cuts the JSON.
    assert answer == {"type": "string", "minLength": 1, "maxLength": 400}


async def test_a_text_answer_before_any_tool_is_sent_back_when_the_first_turn_must_act() -> None:
    outcome, sink, model = await run_required("text", [
        final("text", "2 million"), act("text", "population", {"city": "Paris"}),
        final("text", "2.1 million")])
    assert outcome.status == "succeeded" and outcome.answer == "2.1 million"
    (error,) = sink.of_kind("error")
    assert error.meta == {"format_error": True} and error.input == final("text", "2 million")
    assert error.text == ("call a tool before the final answer: Action: one of population, "
                          "slow, nap, then Action Input: its arguments as JSON")
    assert model.requests[1]["messages"][-1] == {
        "role": "user", "content": f"Observation: Error: {error.text}"}
    assert [s.kind for s in sink.steps if s.kind not in ("thought", "llm")] == [
        "error", "tool", "final"]


async def test_each_text_turn_asks_for_its_shape_and_only_a_later_turn_may_answer() -> None:
    # The shape the embedded model's grammar is built from (agentlab/llm/grammars.py): the
    # labels with the agent's markers as alternatives, its tools held to their parameters.
    model = ScriptedModel([act("text", "population", {"city": "Paris"}),
                           final("text", "2.1 million")])
    params = validate_params("react", {"mode": "text", "first_tool_choice": "required",
                                       "markers": {"thought": ["Gedanke"]}})
    ctx, _ = make_context(model, TOOLS, params=params)
    assert (await execute(ReAct(), ctx, "How many people live in Paris?")).answer == "2.1 million"
    first, second = (r["response_format"] for r in model.requests)
    assert first["type"] == "react_text" and (first["final"], second["final"]) == (False, True)
    assert first["labels"]["thought"] == ["Thought", "Gedanke"]
    assert first["labels"]["final_answer"] == ["Final Answer"]
    population = first["tools"][0]
    assert population["name"] == "population"
    assert population["parameters"]["additionalProperties"] is False


async def test_a_json_thought_is_bounded() -> None:
    _, _, model = await run_required("json", [act("json", "population", {"city": "Paris"}),
                                              final("json", "2.1 million")])
    thought = model.requests[0]["response_format"]["json_schema"]["schema"]["properties"][
        "thought"]
    assert thought == {"type": "string", "maxLength": 200}


async def test_an_answer_after_the_first_turn_is_taken_as_it_is() -> None:
    # Only the first turn must act: an answer the model insists on is its answer (the trace
    # shows the format error before it).
    outcome, sink, _ = await run_required("text", [final("text", "2 million"),
                                                   final("text", "2 million")])
    assert outcome.answer == "2 million" and len(sink.of_kind("error")) == 1


async def test_the_first_turn_may_answer_when_the_agent_has_no_tools() -> None:
    model = ScriptedModel([final("json", "hello")])
    params = validate_params("react", {"mode": "json", "first_tool_choice": "required"})
    ctx, _ = make_context(model, [], params=params)
    outcome = await execute(ReAct(), ctx, "Say hello")
    assert outcome.answer == "hello"
