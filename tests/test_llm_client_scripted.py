"""The LLM client over real HTTP (openai SDK) against the scripted OpenAI-compatible server."""

from __future__ import annotations

import dataclasses
import socket

import pytest

from agentlab.llm.client import OpenAIChatModel
from agentlab.llm.errors import (
    AuthenticationFailed,
    ContextTooLong,
    EndpointUnreachable,
    LLMTimeout,
    RateLimited,
    UnknownModel,
)
from agentlab.llm.types import ProfileConfig
from tests.fake_openai import Delay, Fail, Reply

HELLO = [{"role": "user", "content": "hello"}]
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}


async def test_a_reply_with_usage_cost_and_the_request_as_sent(fake_llm, fake_profile):
    fake_llm.script(Reply(text="Hi there", usage=(1000, 500)))
    result = await OpenAIChatModel(fake_profile).chat(
        HELLO, tools=[WEATHER_TOOL], tool_choice="auto", stop=["Observation:"],
        response_format={"type": "json_object"}, temperature=0.3, max_tokens=50)
    assert result.text == "Hi there" and result.finish_reason == "stop"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (1000, 500)
    # $1 per M in, $2 per M out
    assert result.cost_usd == pytest.approx(1000 / 1e6 * 1 + 500 / 1e6 * 2)
    assert result.profile == "scripted" and result.attempts == 1 and result.latency_ms > 0
    sent = fake_llm.requests[0]
    assert sent["model"] == "scripted-model" and sent["messages"] == HELLO
    assert sent["tools"] == [WEATHER_TOOL] and sent["tool_choice"] == "auto"
    assert sent["stop"] == ["Observation:"] and sent["max_tokens"] == 50
    assert sent["response_format"] == {"type": "json_object"} and sent["temperature"] == 0.3


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_transient_failures_are_retried_with_backoff(fake_llm, fake_profile, status):
    fake_llm.script(Fail(status), Fail(status), Reply(text="third time lucky"))
    result = await OpenAIChatModel(fake_profile).chat(HELLO)
    assert result.text == "third time lucky" and result.attempts == 3
    assert len(fake_llm.requests) == 3


async def test_when_retries_are_spent_the_fallback_profile_answers(fake_llm, fake_profile):
    backup = dataclasses.replace(fake_profile, name="backup", model="backup-model", retries=0)
    main = dataclasses.replace(fake_profile, retries=1, fallback=backup)
    fake_llm.script(Fail(500), Fail(500), Reply(text="from the backup"))
    result = await OpenAIChatModel(main).chat(HELLO)
    assert result.text == "from the backup"
    assert result.profile == "backup" and result.attempts == 3
    assert fake_llm.requests[-1]["model"] == "backup-model"


async def test_rate_limit_without_fallback_is_a_specific_error(fake_llm, fake_profile):
    fake_llm.script(Fail(429, "slow down"), Fail(429, "slow down"), Fail(429, "slow down"))
    with pytest.raises(RateLimited, match="slow down"):
        await OpenAIChatModel(fake_profile).chat(HELLO)


async def test_a_slow_endpoint_times_out_then_retries(fake_llm, fake_profile):
    profile = dataclasses.replace(fake_profile, timeout_s=0.3, retries=1)
    fake_llm.script(Delay(1.0, Reply(text="too late")), Reply(text="on time"))
    result = await OpenAIChatModel(profile).chat(HELLO)
    assert result.text == "on time" and result.attempts == 2
    fake_llm.script(Delay(1.0, Reply()), Delay(1.0, Reply()))
    with pytest.raises(LLMTimeout, match="0.3 s"):
        await OpenAIChatModel(profile).chat(HELLO)


async def test_malformed_tool_call_arguments_are_kept_raw(fake_llm, fake_profile):
    fake_llm.script(Reply(tool_calls=[("get_weather", '{"city": "Paris"'),
                                      ("get_weather", '{"city": "Rome"}')]))
    result = await OpenAIChatModel(fake_profile).chat(HELLO, tools=[WEATHER_TOOL])
    broken, good = result.tool_calls
    assert broken.arguments is None and broken.raw_arguments == '{"city": "Paris"'
    assert "malformed arguments for get_weather" in broken.error
    assert good.arguments == {"city": "Rome"} and good.error is None
    assert result.finish_reason == "tool_calls"


async def test_streamed_chunks_reassemble_to_the_same_result(fake_llm, fake_profile):
    reply = Reply(text="The weather in Paris is sunny today.",
                  tool_calls=[("get_weather", '{"city": "Paris", "days": 2}')], usage=(42, 17))
    fake_llm.script(reply, reply)
    model = OpenAIChatModel(fake_profile)
    plain = await model.chat(HELLO, tools=[WEATHER_TOOL])
    tokens: list[str] = []
    streamed = await model.chat(HELLO, tools=[WEATHER_TOOL], on_token=tokens.append)
    assert len(tokens) > 3 and "".join(tokens) == streamed.text == plain.text
    assert streamed.tool_calls == plain.tool_calls
    assert streamed.usage == plain.usage and streamed.finish_reason == plain.finish_reason
    assert streamed.ttft_ms is not None and plain.ttft_ms is None
    assert fake_llm.requests[1]["stream"] is True


async def test_async_token_callbacks_are_awaited(fake_llm, fake_profile):
    fake_llm.script(Reply(text="abcdefgh"))
    seen: list[str] = []

    async def on_token(delta: str) -> None:
        seen.append(delta)

    await OpenAIChatModel(fake_profile).chat(HELLO, on_token=on_token)
    assert "".join(seen) == "abcdefgh"


async def test_an_endpoint_that_is_down_names_its_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    profile = ProfileConfig(name="down", base_url=f"http://127.0.0.1:{port}/v1", model="m",
                            retries=1, backoff_s=0.01)
    with pytest.raises(EndpointUnreachable) as info:
        await OpenAIChatModel(profile).chat(HELLO)
    assert f"127.0.0.1:{port}" in str(info.value) and "is the server running" in str(info.value)


async def test_a_bad_key_is_reported_without_leaking_it(fake_llm, fake_profile, monkeypatch):
    monkeypatch.setenv("AGENTLAB_TEST_KEY", "sk-very-secret-value")
    profile = dataclasses.replace(fake_profile, api_key_env="AGENTLAB_TEST_KEY")
    fake_llm.script(Fail(401, "Incorrect API key provided"))
    with pytest.raises(AuthenticationFailed) as info:
        await OpenAIChatModel(profile).chat(HELLO)
    assert "AGENTLAB_TEST_KEY" in str(info.value) and "sk-very-secret" not in str(info.value)
    assert fake_llm.requests[0]["_authorization"] == "Bearer sk-very-secret-value"
    assert len(fake_llm.requests) == 1  # not retried


async def test_no_key_variable_never_sends_the_environments_openai_key(
        fake_llm, fake_profile, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-meant-for-openai")
    fake_llm.script(Reply(text="ok"))
    await OpenAIChatModel(fake_profile).chat(HELLO)
    assert "sk-meant-for-openai" not in fake_llm.requests[0]["_authorization"]


async def test_unknown_model_and_context_too_long(fake_llm, fake_profile):
    fake_llm.script(Fail(404, "The model `nope` does not exist", "model_not_found"))
    with pytest.raises(UnknownModel, match="scripted-model"):
        await OpenAIChatModel(fake_profile).chat(HELLO)
    fake_llm.script(Fail(400, "This model's maximum context length is 2048 tokens, however you "
                              "requested 5000 tokens", "context_length_exceeded"))
    with pytest.raises(ContextTooLong, match="too long"):
        await OpenAIChatModel(fake_profile).chat(HELLO)
    assert len(fake_llm.requests) == 2  # neither is retried


async def test_a_json_schema_is_resent_in_llama_cpp_form_when_the_server_asks(
        fake_llm, fake_profile):
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    fake_llm.script(Fail(422, "response_format.type: Input should be 'text' or 'json_object'"),
                    Reply(text='{"a": "1"}'), Reply(text='{"a": "2"}'))
    model = OpenAIChatModel(fake_profile)
    assert (await model.chat(HELLO, response_format=fmt)).text == '{"a": "1"}'
    assert (await model.chat(HELLO, response_format=fmt)).text == '{"a": "2"}'
    sent = [r["response_format"] for r in fake_llm.requests]
    assert sent == [fmt, {"type": "json_object", "schema": schema},
                    {"type": "json_object", "schema": schema}]  # learnt once per profile
