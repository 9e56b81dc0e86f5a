"""The LLM client against the real embedded SmolLM2 server (llama-cpp-python) on loopback.

These assert that the plumbing works (a reply, a stream, a tool call), not that a 135M model is
clever."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from agentlab.llm.client import OpenAIChatModel
from agentlab.llm.errors import ContextTooLong

pytestmark = pytest.mark.embedded

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}


async def test_the_embedded_model_answers_a_chat(embedded_profile):
    result = await OpenAIChatModel(embedded_profile).chat(
        [{"role": "user", "content": "What is the capital of France?"}], max_tokens=30)
    assert result.text.strip()
    assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0
    assert result.profile == "Local SmolLM2" and result.model


async def test_the_embedded_model_streams_tokens(embedded_profile):
    tokens: list[str] = []
    result = await OpenAIChatModel(embedded_profile).chat(
        [{"role": "user", "content": "Count from one to five."}], max_tokens=30,
        on_token=tokens.append)
    assert len(tokens) >= 2 and "".join(tokens) == result.text
    assert result.ttft_ms is not None and result.ttft_ms <= result.latency_ms


async def test_the_embedded_model_returns_a_real_tool_call(embedded_profile):
    # agentlab-chatml constrains decoding to the named function's schema.
    result = await OpenAIChatModel(embedded_profile).chat(
        [{"role": "user", "content": "What is the weather in Paris?"}],
        tools=[WEATHER_TOOL],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        max_tokens=60,
    )
    assert result.tool_calls, result
    call = result.tool_calls[0]
    assert call.name == "get_weather" and call.id
    assert call.error is None and isinstance(call.arguments, dict) and "city" in call.arguments


async def test_the_embedded_model_follows_a_json_schema(embedded_profile):
    import json

    schema = {"type": "object", "properties": {"answer": {"type": "string"}},
              "required": ["answer"]}
    result = await OpenAIChatModel(embedded_profile).chat(
        [{"role": "user", "content": "What is 2 + 2? Reply in JSON."}], max_tokens=60,
        response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": schema}})
    assert "answer" in json.loads(result.text)
    assert result.attempts == 1  # the embedded server's dialect is known before the first call


async def test_a_required_tool_call_streamed_and_not_is_the_same_call(embedded_profile):
    # tool_choice "required": our handler's grammar leaves out the answer branch. A streamed
    # tool turn is answered in one attempt (the call comes whole, as one delta).
    model = OpenAIChatModel(embedded_profile)
    question = [{"role": "user", "content": "What is the weather in Paris?"}]
    plain = await model.chat(question, tools=[WEATHER_TOOL], tool_choice="required",
                             max_tokens=60)
    assert [c.name for c in plain.tool_calls] == ["get_weather"], plain
    streamed = await model.chat(question, tools=[WEATHER_TOOL], tool_choice="required",
                                max_tokens=60, on_token=lambda d: None)
    assert [c.name for c in streamed.tool_calls] == ["get_weather"], streamed
    assert streamed.tool_calls[0].arguments == plain.tool_calls[0].arguments
    assert streamed.attempts == 1 and streamed.finish_reason == "tool_calls"


async def test_an_automatic_tool_choice_streams_in_one_attempt(embedded_profile):
    # "auto": a call or an answer in plain text, whichever the model writes; the answer streams
    # as it is written and nothing is asked twice.
    tokens: list[str] = []
    result = await OpenAIChatModel(embedded_profile).chat(
        [{"role": "system", "content": "You are a helpful assistant with tools."},
         {"role": "user", "content": "What is the weather in Paris?"}],
        tools=[WEATHER_TOOL], on_token=tokens.append, max_tokens=60)
    assert result.attempts == 1
    if result.tool_calls:
        assert result.tool_calls[0].name == "get_weather" and result.tool_calls[0].arguments
    else:
        assert result.text.strip() and "".join(tokens) == result.text and len(tokens) > 1


async def test_two_streams_at_once_both_finish(embedded_profile):
    # The server runs with --interrupt_requests False: a second request must not cut the first.
    model = OpenAIChatModel(embedded_profile)
    prompts = ["Name three colours.", "Name three animals."]
    results = await asyncio.gather(*(
        model.chat([{"role": "user", "content": p}], max_tokens=24, on_token=lambda d: None)
        for p in prompts))
    for result in results:
        assert result.text.strip() and result.finish_reason in {"stop", "length"}
        assert result.attempts == 1


# ------------------------------------------------------------------ context windows


async def test_the_window_estimate_is_above_the_models_own_count(embedded_llm):
    # The rule in agentlab/runtime/window.py against SmolLM2's tokenizer itself.
    import json
    import urllib.request
    from pathlib import Path

    from agentlab.runtime.window import estimate_tokens
    from agentlab.tools.registry import builtin_tools
    from tests.token_counts import MEASURED

    samples = [text for text, _ in MEASURED] + [
        Path("agentlab/runtime/context.py").read_text(),
        json.dumps([spec.name for spec in builtin_tools().values()]),
        Path("docs/ARCHITECTURE.md").read_text()[:20_000]]

    def count(text: str) -> int:
        request = urllib.request.Request(
            embedded_llm.removesuffix("/v1") + "/extras/tokenize",
            data=json.dumps({"input": text}).encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return len(json.loads(response.read())["tokens"])

    counts = await asyncio.gather(*(asyncio.to_thread(count, s) for s in samples))
    for text, real in zip(samples, counts, strict=True):
        assert estimate_tokens(text) >= real, text[:60]


async def test_a_prompt_over_the_servers_window_is_reported_with_its_count(embedded_profile):
    # Streamed, llama-cpp-python opens the stream and ends it empty (the reason is only in its
    # log); the client asks again unstreamed and reports the server's own words and counts.
    import dataclasses

    model = OpenAIChatModel(dataclasses.replace(embedded_profile, retries=2))
    long = [{"role": "user", "content": "Summarise: " + "the quick brown fox " * 1500}]
    with pytest.raises(ContextTooLong) as info:
        await model.chat(long, on_token=lambda d: None)
    assert info.value.limit_tokens == 4096 and info.value.prompt_tokens > 4096
    assert "the server counted" in str(info.value) and info.value.attempts == 2
    # The connection it broke is not reused: the next question gets its answer.
    answer = await model.chat([{"role": "user", "content": "Say hi."}], max_tokens=8,
                              on_token=lambda d: None)
    assert answer.text.strip() and answer.attempts == 1


@pytest.mark.django_db(transaction=True)
async def test_an_overlong_chat_message_is_refused_and_the_next_one_answered(
        embedded_llm, user, monkeypatch):
    # The whole chat path: a turn's run, its trace, and the next turn's history (history_of).
    from asgiref.sync import sync_to_async

    from agentlab.chat.models import Conversation
    from agentlab.chat.turns import add_turn_now
    from agentlab.models import Agent, ModelProfile
    from agentlab.runs.execution import execute_run
    from traces.models import Run, Step

    monkeypatch.setenv("AGENTLAB_LOCAL_LLM_URL", embedded_llm)

    def conversation() -> Conversation:
        # The embedded profile as `setup` makes it: blank URL and window (4,096: its --n_ctx).
        profile = ModelProfile.objects.create(name="Local SmolLM2", base_url="", model="",
                                              temperature=0.0, max_tokens=48, retries=0,
                                              timeout_s=120)
        agent = Agent.objects.create(name="Chat", paradigm="react", model_profile=profile,
                                     params={"mode": "function_calling"})
        return Conversation.objects.create(user=user, agent=agent)

    async def say(conv: Conversation, message: str) -> Run:
        turn = await sync_to_async(add_turn_now)(conv.pk, message)
        await execute_run(await Run.objects.aget(pk=turn.run_id))
        return await Run.objects.aget(pk=turn.run_id)

    conv = await sync_to_async(conversation)()
    pasted = "Please summarise this report.\n\n" + (
        "The quarterly figures show steady growth in every region, with costs held flat and "
        "new customers arriving from the partner programme.\n") * 180  # ~22,000 characters
    refused = await say(conv, pasted)
    assert refused.status == "failed"
    assert refused.error.startswith("the message is ~") and (
        "Local SmolLM2 reads at most 4,096 tokens (with 48 kept for the reply)" in refused.error)
    assert refused.error in refused.final_answer  # what the chat bubble shows
    llm = await Step.objects.aget(run=refused, kind="llm")
    assert llm.status == "error" and llm.meta["refused"]["context_tokens"] == 4096
    assert (llm.tokens_in, llm.tokens_out) == (0, 0)  # nothing was sent

    answered = await say(conv, "Hello! What is the capital of France?")
    assert answered.status == "succeeded" and answered.final_answer.strip(), answered.error
    sent = await Step.objects.filter(run=answered, kind="llm").afirst()
    assert sent.input["messages"][-1]["content"] == "Hello! What is the capital of France?"


async def test_a_text_react_turn_that_must_act_is_an_action_with_valid_arguments(
        embedded_profile):
    # Asked a sum it "knows", SmolLM2 writes "Final Answer: …" at once; the grammar of a turn
    # that must act leaves it a thought, one of the tools and that tool's arguments as JSON.
    calculator = {"name": "calculator", "parameters": {
        "type": "object", "properties": {"expression": {"type": "string", "minLength": 1}},
        "required": ["expression"]}}
    fmt = {"type": "react_text", "final": False, "labels": {},
           "tools": [calculator, {"name": "get_weather",
                                  "parameters": WEATHER_TOOL["function"]["parameters"]}]}
    messages = [{"role": "system", "content": "Answer with Thought, then Action and Action "
                                              "Input, or Final Answer."},
                {"role": "user", "content": "Question: What is 2 + 2?"}]
    result = await OpenAIChatModel(embedded_profile).chat(messages, response_format=fmt,
                                                          max_tokens=96)
    match = re.fullmatch(r"Thought: [^\n]+\nAction: (calculator|get_weather)\n"
                         r"Action Input: (\{.*\})\s*", result.text)
    assert match, result.text
    arguments = json.loads(match[2])
    assert set(arguments) == {"expression" if match[1] == "calculator" else "city"}
    assert all(isinstance(v, str) and v for v in arguments.values())


async def test_a_rewoo_plan_under_its_grammar_reads_as_a_plan_of_the_agents_tools(
        embedded_profile):
    # Without the grammar SmolLM2 wrote calls to tools that do not exist ("get_temperature")
    # and the call inside the plan line; under it every step is one of the tools, numbered.
    from agentlab.paradigms.parsing import parse_rewoo_plan
    from agentlab.paradigms.prompt_files import fill, load_prompt

    tools = ["get_weather", "calculator", "LLM"]
    system = fill(load_prompt("rewoo_planner.txt"), format="",
                  tools="get_weather(city: string)\ncalculator(expression: string)")
    # No examples: the prompt's own (Oslo or Rome) is what the model has to go on.
    messages = [{"role": "system", "content": system},
                {"role": "user", "content": "Task: What is the temperature in Paris right now, "
                                            "in °C?"}]
    result = await OpenAIChatModel(embedded_profile).chat(
        messages, response_format={"type": "rewoo_plan", "tools": tools, "max_steps": 3},
        max_tokens=160)
    steps = parse_rewoo_plan(result.text)
    assert 1 <= len(steps) <= 3, result.text
    assert [s.var for s in steps] == [f"#E{n}" for n in range(1, len(steps) + 1)]
    assert all(s.tool in tools and s.tool_input for s in steps), result.text
    assert all(line.startswith(("Plan: ", "#E")) for line in result.text.strip().splitlines())
