"""The LLM client against the real embedded SmolLM2 server (llama-cpp-python) on loopback.

These assert that the plumbing works (a reply, a stream, a tool call), not that a 135M model is
clever."""

from __future__ import annotations

import asyncio

import pytest

from agentlab.llm.client import OpenAIChatModel

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
    # chatml-function-calling constrains decoding to the named function's schema.
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


async def test_auto_tool_choice_and_a_streamed_tool_call(embedded_profile):
    # With tool_choice="auto" (temperature 0) SmolLM2 picks get_weather for this question; with
    # no tool_choice at all llama.cpp answers in prose, and "required" is a 500 there.
    model = OpenAIChatModel(embedded_profile)
    question = [{"role": "user", "content": "What is the weather in Paris?"}]
    auto = await model.chat(question, tools=[WEATHER_TOOL], tool_choice="auto", max_tokens=60)
    assert [c.name for c in auto.tool_calls] == ["get_weather"], auto
    streamed = await model.chat(question, tools=[WEATHER_TOOL], max_tokens=60,
                                tool_choice={"type": "function",
                                             "function": {"name": "get_weather"}},
                                on_token=lambda d: None)
    assert [c.name for c in streamed.tool_calls] == ["get_weather"], streamed
    assert streamed.tool_calls[0].arguments == auto.tool_calls[0].arguments
    assert streamed.usage_estimated  # llama.cpp sends no usage chunk when streaming


async def test_an_automatic_tool_choice_works_streamed(embedded_profile):
    # llama.cpp cannot stream an "auto" tool call (its stream breaks at once); the client asks
    # again unstreamed, so a streaming caller still gets the call.
    tokens: list[str] = []
    result = await OpenAIChatModel(embedded_profile).chat(
        [{"role": "system", "content": "You are a helpful assistant with tools."},
         {"role": "user", "content": "What is the weather in Paris?"}],
        tools=[WEATHER_TOOL], on_token=tokens.append, max_tokens=60)
    assert [c.name for c in result.tool_calls] == ["get_weather"], result
    assert result.tool_calls[0].arguments and result.finish_reason == "tool_calls"


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
