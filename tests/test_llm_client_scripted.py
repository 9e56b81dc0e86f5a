"""The LLM client over real HTTP (openai SDK) against the scripted OpenAI-compatible server."""

from __future__ import annotations

import dataclasses
import socket
import ssl
import time

import pytest

from agentlab.llm.client import OpenAIChatModel
from agentlab.llm.errors import (
    AuthenticationFailed,
    BadResponse,
    ContextTooLong,
    EndpointUnreachable,
    LLMError,
    LLMTimeout,
    RateLimited,
    UnknownModel,
)
from agentlab.llm.types import ChatResult, ProfileConfig
from tests.fake_openai import BrokenStream, Delay, Fail, RawServer, Reply

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


async def test_when_the_whole_chain_fails_the_error_tells_each_reason(fake_llm, fake_profile):
    backup = dataclasses.replace(fake_profile, name="backup", retries=0)
    main = dataclasses.replace(fake_profile, retries=0, fallback=backup)
    fake_llm.script(Fail(503, "main is down"), Fail.bad_key())
    with pytest.raises(AuthenticationFailed) as info:
        await OpenAIChatModel(main).chat(HELLO)
    assert info.value.profile == "backup" and info.value.attempts == 2
    assert "'backup'" in str(info.value) and "main is down" in str(info.value)


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


async def test_an_error_never_shows_the_login_or_key_of_a_base_url():
    # The message becomes an llm step's text in the trace: a URL's credentials stay out of it.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    profile = ProfileConfig(name="down", model="m", retries=0,
                            base_url=f"http://alice:hunter2@127.0.0.1:{port}/v1?api_key=sekret")
    with pytest.raises(EndpointUnreachable) as info:
        await OpenAIChatModel(profile).chat(HELLO)
    shown = f"{info.value} {info.value.base_url}"
    assert f"127.0.0.1:{port}/v1" in shown
    assert "hunter2" not in shown and "sekret" not in shown and "alice" not in shown


async def test_a_bad_key_is_reported_without_leaking_it(fake_llm, fake_profile, monkeypatch):
    monkeypatch.setenv("AGENTLAB_TEST_KEY", "sk-very-secret-value")
    profile = dataclasses.replace(fake_profile, api_key_env="AGENTLAB_TEST_KEY")
    fake_llm.script(Fail(401, "Incorrect API key provided"))
    with pytest.raises(AuthenticationFailed) as info:
        await OpenAIChatModel(profile).chat(HELLO)
    assert "AGENTLAB_TEST_KEY" in str(info.value) and "sk-very-secret" not in str(info.value)
    assert fake_llm.headers[0]["authorization"] == "Bearer sk-very-secret-value"
    assert len(fake_llm.requests) == 1  # not retried


@pytest.mark.parametrize("variable", ["SECRET_KEY", "DATABASE_URL", "DJANGO_SETTINGS_MODULE"])
async def test_a_variable_the_server_runs_on_is_never_sent(fake_llm, fake_profile, monkeypatch,
                                                           variable):
    # A snapshot from an imported bundle names the server's own secret: refused before any
    # request, whatever the admin said when the row was saved.
    monkeypatch.setenv(variable, "the-servers-own-secret")
    profile = dataclasses.replace(fake_profile, api_key_env=variable)
    with pytest.raises(AuthenticationFailed, match=f"{variable} is a variable the server"):
        await OpenAIChatModel(profile).chat(HELLO)
    assert fake_llm.requests == []


async def test_no_key_variable_never_sends_the_environments_openai_key(
        fake_llm, fake_profile, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-meant-for-openai")
    fake_llm.script(Reply(text="ok"))
    await OpenAIChatModel(fake_profile).chat(HELLO)
    assert "sk-meant-for-openai" not in fake_llm.headers[0]["authorization"]


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


async def test_a_stream_without_usage_is_estimated_and_says_so(fake_llm, fake_profile):
    fake_llm.script(Reply(text="x" * 40, usage=(0, 0)))
    fake_llm.omit_stream_usage = True
    result = await OpenAIChatModel(fake_profile).chat(HELLO, on_token=lambda d: None)
    assert result.usage_estimated and result.usage.completion_tokens == 10
    assert result.usage.prompt_tokens > 0 and result.cost_usd > 0


async def test_models_of_one_profile_share_a_client_and_its_keep_alive_connection(
        fake_llm, fake_profile):
    # Two runs' models of the same profile: one client (building one costs ~30 ms of CPU) and
    # so one pooled connection for their calls one after another.
    fake_llm.responder = lambda body: "ok"
    first, second = OpenAIChatModel(fake_profile), OpenAIChatModel(fake_profile)
    for _ in range(3):
        assert (await first.chat(HELLO)).text == "ok"
        assert (await second.chat(HELLO)).text == "ok"
    assert len(fake_llm.peers) == 6 and len(set(fake_llm.peers)) == 1


def test_a_loops_connections_are_closed_when_it_ends(fake_llm, fake_profile, caplog):
    """A run's loop (asyncio.run, a worker's, a test's) leaves no connection of its model open,
    and nothing logs "Unclosed client session" when its objects are collected."""
    import asyncio
    import gc

    from agentlab.llm import wire

    fake_llm.responder = lambda body: "ok"

    async def calls() -> set:
        model = OpenAIChatModel(fake_profile)
        assert (await model.chat(HELLO)).text == "ok"
        assert (await model.chat(HELLO, on_token=lambda d: None)).text == "ok"  # and a stream
        return set(getattr(asyncio.get_running_loop(), wire._ATTRIBUTE))  # the loop's sessions

    sessions = asyncio.run(calls())
    gc.collect()
    assert sessions and all(session.closed for session in sessions)
    assert not [r for r in caplog.records if "nclosed" in r.getMessage()]


async def test_a_dropped_connection_is_retried(fake_llm, fake_profile):
    from tests.fake_openai import Drop

    fake_llm.script(Drop(), Reply(text="back again"))
    result = await OpenAIChatModel(fake_profile).chat(HELLO)
    assert result.text == "back again" and result.attempts == 2


async def test_a_refused_connection_says_so(fake_profile):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    profile = dataclasses.replace(fake_profile, base_url=f"http://127.0.0.1:{port}/v1", retries=0)
    with pytest.raises(EndpointUnreachable, match="connection refused") as info:
        await OpenAIChatModel(profile).chat(HELLO)
    assert info.value.retryable and info.value.profile == "scripted"
    assert info.value.base_url == profile.base_url and info.value.kind == "unreachable"


async def test_a_bad_key_goes_to_the_fallback_without_retrying(fake_llm, fake_profile):
    backup = dataclasses.replace(fake_profile, name="backup")
    fake_llm.script(Fail.bad_key(), Reply(text="backup here"))
    result = await OpenAIChatModel(dataclasses.replace(fake_profile, fallback=backup)).chat(HELLO)
    assert result.profile == "backup" and result.attempts == 2


async def test_context_too_long_skips_the_fallback(fake_llm, fake_profile):
    backup = dataclasses.replace(fake_profile, name="backup")
    fake_llm.script(Fail.context_too_long(), Reply(text="never"))
    with pytest.raises(ContextTooLong):
        await OpenAIChatModel(dataclasses.replace(fake_profile, fallback=backup)).chat(HELLO)
    assert len(fake_llm.requests) == 1


async def test_a_stream_that_stalls_past_the_timeout_is_a_timeout(fake_llm, fake_profile):
    profile = dataclasses.replace(fake_profile, timeout_s=0.2, retries=0)
    fake_llm.script(Reply(text="slow words here", chunk_delay_s=0.5))
    with pytest.raises(LLMTimeout):
        await OpenAIChatModel(profile).chat(HELLO, on_token=lambda d: None)


async def test_time_to_first_token_is_before_the_end(fake_llm, fake_profile):
    fake_llm.script(Reply(text="a" * 16, chunk_delay_s=0.05))
    result = await OpenAIChatModel(fake_profile).chat(HELLO, on_token=lambda d: None)
    assert result.ttft_ms is not None and 0 < result.ttft_ms < result.latency_ms - 100


async def test_a_responder_answers_and_an_exhausted_script_says_so(fake_llm, fake_profile):
    no_retry = dataclasses.replace(fake_profile, retries=0)
    with pytest.raises(LLMError, match="script exhausted"):
        await OpenAIChatModel(no_retry).chat(HELLO)
    fake_llm.responder = lambda body: f"you said {body['messages'][-1]['content']}"
    assert (await OpenAIChatModel(no_retry).chat(HELLO)).text == "you said hello"


async def test_the_result_is_json_serialisable(fake_llm, fake_profile):
    import json

    fake_llm.script(Reply(text="hi", tool_calls=[("get_weather", '{"city": "Paris"}')]))
    result = await OpenAIChatModel(fake_profile).chat(HELLO, tools=[WEATHER_TOOL])
    data = json.loads(json.dumps(result.to_dict()))
    assert data["tool_calls"][0]["arguments"] == {"city": "Paris"}
    assert data["usage"] == {"prompt_tokens": 10, "completion_tokens": 5}
    assert ChatResult.from_dict(data) == result


async def test_offered_tools_default_to_an_automatic_choice(fake_llm, fake_profile):
    # OpenAI's default anyway; llama.cpp's server ignores the tools unless it is said.
    fake_llm.script(Reply(text="a"), Reply(text="b"))
    await OpenAIChatModel(fake_profile).chat(HELLO, tools=[WEATHER_TOOL])
    await OpenAIChatModel(fake_profile).chat(HELLO)
    assert fake_llm.requests[0]["tool_choice"] == "auto"
    assert "tool_choice" not in fake_llm.requests[1] and "tools" not in fake_llm.requests[1]


CONVERSATION = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [{
        "id": "c1", "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "sunny, 21 C"},
    {"role": "assistant", "content": "Sunny.", "tool_calls": []},
]


@pytest.mark.parametrize("as_user", [False, True])
async def test_the_conversation_is_sent_in_a_form_every_server_takes(
        fake_llm, fake_profile, as_user):
    fake_llm.script(Reply(text="ok"))
    profile = dataclasses.replace(fake_profile, tool_results_as_user=as_user)
    await OpenAIChatModel(profile).chat(CONVERSATION)
    # The caller's list (what a trace records) is left as it was.
    assert CONVERSATION[1]["content"] is None and CONVERSATION[2]["role"] == "tool"
    wire = fake_llm.requests[0]["messages"]
    assert wire[1]["content"] == "" and wire[1]["tool_calls"] == CONVERSATION[1]["tool_calls"]
    assert "tool_calls" not in wire[3]  # an empty list breaks llama.cpp's template
    if as_user:  # llama.cpp's chatml-function-calling template drops `tool` messages
        assert wire[2] == {"role": "user", "content": "Result of get_weather: sunny, 21 C"}
    else:
        assert wire[2] == CONVERSATION[2]


async def test_the_embedded_model_gets_tool_results_as_user_messages(fake_llm, fake_profile):
    fake_llm.script(Reply(text="ok"))
    await OpenAIChatModel(dataclasses.replace(fake_profile, model="")).chat(CONVERSATION)
    assert fake_llm.requests[0]["model"] == "smollm2-135m-instruct"
    assert fake_llm.requests[0]["messages"][2]["role"] == "user"


async def test_a_stream_of_nothing_with_tools_is_asked_again_unstreamed(fake_llm, fake_profile):
    # llama.cpp's server opens the stream for a streamed "auto" tool call, then fails inside.
    fake_llm.script(BrokenStream(), Reply(text="Let me check.",
                                          tool_calls=[("get_weather", '{"city": "Paris"}')]))
    tokens: list[str] = []
    result = await OpenAIChatModel(fake_profile).chat(HELLO, tools=[WEATHER_TOOL],
                                                      on_token=tokens.append)
    assert result.tool_calls[0].arguments == {"city": "Paris"} and result.attempts == 2
    assert "".join(tokens) == "Let me check."
    assert fake_llm.requests[0]["stream"] and not fake_llm.requests[1].get("stream")


async def test_after_a_broken_tool_stream_tool_turns_are_sent_unstreamed(fake_llm, fake_profile):
    # A broken stream leaves llama.cpp generating into the next request's time: learn it once.
    model = OpenAIChatModel(fake_profile)
    fake_llm.script(BrokenStream(), Reply(tool_calls=[("get_weather", '{"city": "Paris"}')]),
                    Reply(text="It is sunny."), Reply(text="Plain chat streams still."))
    tokens: list[str] = []
    await model.chat(HELLO, tools=[WEATHER_TOOL], on_token=tokens.append)
    second = await model.chat(HELLO, tools=[WEATHER_TOOL], on_token=tokens.append)
    assert second.text == "It is sunny." and second.attempts == 1
    assert tokens[-1] == "It is sunny."  # the caller still gets the words as a token
    assert not fake_llm.requests[2].get("stream")
    await model.chat(HELLO, on_token=tokens.append)
    assert fake_llm.requests[3]["stream"]  # turns without tools are streamed as before


async def test_a_stream_cut_short_is_an_error_then_retried(fake_llm, fake_profile):
    reply = Reply(text="A complete sentence, at last.")
    fake_llm.script(BrokenStream(reply, after=3), reply)
    tokens: list[str] = []
    result = await OpenAIChatModel(fake_profile).chat(HELLO, on_token=tokens.append)
    assert result.text == reply.text and result.finish_reason == "stop" and result.attempts == 2
    assert "".join(tokens).endswith(reply.text)  # the retry streams again from its start
    fake_llm.script(BrokenStream(reply, after=3))
    with pytest.raises(LLMError, match="broke off"):
        await OpenAIChatModel(dataclasses.replace(fake_profile, retries=0)).chat(
            HELLO, on_token=tokens.append)


async def test_an_empty_automatic_reply_is_asked_again_for_words(fake_llm, fake_profile):
    # llama.cpp's "auto" branch for a message only lets the model end (or name a function).
    fake_llm.script(Reply(text="functions.get_weather:"), Reply(text="Hello there!"))
    result = await OpenAIChatModel(fake_profile).chat(HELLO, tools=[WEATHER_TOOL])
    assert result.text == "Hello there!" and result.attempts == 2
    assert [r["tool_choice"] for r in fake_llm.requests] == ["auto", "none"]


async def test_a_server_that_refuses_stream_options_is_asked_without(fake_llm, fake_profile):
    fake_llm.script(Fail(400, "Unrecognized request argument supplied: stream_options"),
                    Reply(text="fine", usage=(3, 1)), Reply(text="again"))
    model = OpenAIChatModel(fake_profile)
    result = await model.chat(HELLO, on_token=lambda d: None)
    assert result.text == "fine" and result.attempts == 2 and result.usage_estimated
    await model.chat(HELLO, on_token=lambda d: None)
    assert ["stream_options" in r for r in fake_llm.requests] == [True, False, False]


async def test_an_exhausted_quota_is_not_retried_and_the_key_never_shows(
        fake_llm, fake_profile, monkeypatch):
    monkeypatch.setenv("AGENTLAB_TEST_KEY", "sk-secret-1234567890")
    profile = dataclasses.replace(fake_profile, api_key_env="AGENTLAB_TEST_KEY")
    fake_llm.script(Fail(429, "You exceeded your quota (key sk-secret-1234567890)",
                         "insufficient_quota"))
    with pytest.raises(RateLimited) as info:
        await OpenAIChatModel(profile).chat(HELLO)
    assert not info.value.retryable and info.value.attempts == 1 and info.value.status == 429
    assert "sk-secret" not in str(info.value) and "quota" in str(info.value)


async def test_retry_after_is_honoured_and_attempts_are_on_the_error(fake_llm, fake_profile):
    fake_llm.script(Fail(429, headers={"Retry-After": "0.3"}), Reply(text="ok"))
    started = time.perf_counter()
    assert (await OpenAIChatModel(fake_profile).chat(HELLO)).attempts == 2
    assert time.perf_counter() - started >= 0.3
    fake_llm.script(Fail(503), Fail(503), Fail(503))
    with pytest.raises(LLMError) as info:
        await OpenAIChatModel(fake_profile).chat(HELLO)
    assert info.value.kind == "server_error" and info.value.attempts == 3


async def test_a_missing_key_variable_is_named(fake_llm, fake_profile, monkeypatch):
    monkeypatch.delenv("AGENTLAB_UNSET_KEY", raising=False)
    fake_llm.script(Fail.bad_key())
    profile = dataclasses.replace(fake_profile, api_key_env="AGENTLAB_UNSET_KEY")
    with pytest.raises(AuthenticationFailed, match="AGENTLAB_UNSET_KEY is not set"):
        await OpenAIChatModel(profile).chat(HELLO)
    assert fake_llm.headers[0]["authorization"] == "Bearer not-needed"


async def test_llama_cpps_unknown_model_error_is_recognised(fake_llm, fake_profile):
    fake_llm.script(Fail(400, "The model `x.gguf` does not exist", "model_not_found"))
    with pytest.raises(UnknownModel):
        await OpenAIChatModel(fake_profile).chat(HELLO)


async def test_tool_names_repeated_in_every_delta_are_not_doubled(fake_llm, fake_profile):
    fake_llm.script(Reply(tool_calls=[("get_weather", '{"city": "Paris"}')],
                          repeat_tool_names=True))
    result = await OpenAIChatModel(fake_profile).chat(HELLO, on_token=lambda d: None)
    assert [c.name for c in result.tool_calls] == ["get_weather"]
    assert result.tool_calls[0].arguments == {"city": "Paris"}


# ------------------------------------------------------------------ context windows

LLAMA_CPP_PY_TOO_LONG = Fail(
    400, "This model's maximum context length is 4096 tokens. However, you requested 6026 tokens "
         "(6010 in the messages, 16 in the completion). Please reduce the length of the "
         "messages or completion.", "context_length_exceeded")


@pytest.mark.parametrize(("fail", "counts"), [
    (LLAMA_CPP_PY_TOO_LONG, (6010, 4096)),  # llama-cpp-python (and vLLM), unstreamed
    (Fail(400, "request (4476 tokens) exceeds the available context size (4096 tokens), try "
               "increasing it"), (4476, 4096)),  # llama.cpp's llama-server
    (Fail(400, "This model's maximum context length is 128000 tokens. However, your messages "
               "resulted in 130512 tokens. Please reduce the length of the messages.",
          "context_length_exceeded"), (130512, 128000)),  # OpenAI
    (Fail(500, "Requested tokens (6010) exceed context window of 4096"), (6010, 4096)),
    (Fail(400, "prompt is too long: 210000 tokens > 200000 maximum"), (None, None)),
], ids=["llama-cpp-python", "llama-server", "openai", "llama-cpp-python-500", "other"])
async def test_a_servers_context_length_error_is_reported_as_what_it_is(
        fake_llm, fake_profile, fail, counts):
    fake_llm.script(fail)
    with pytest.raises(ContextTooLong) as info:
        await OpenAIChatModel(fake_profile).chat(HELLO)
    error = info.value
    assert (error.prompt_tokens, error.limit_tokens) == counts
    assert str(error).startswith("the prompt is too long for 'scripted-model'")
    if counts[0]:
        assert f"the server counted {counts[0]:,} tokens for a window of {counts[1]:,}" in str(
            error)
    assert fail.message in str(error) and "(profile 'scripted'" in str(error)
    assert len(fake_llm.requests) == 1  # never retried: it would be too long again


async def test_a_rate_limit_on_tokens_is_not_taken_for_a_long_prompt(fake_llm, fake_profile):
    fake_llm.script(*[Fail(429, "Rate limit reached: too many tokens per minute")] * 3)
    with pytest.raises(RateLimited):
        await OpenAIChatModel(fake_profile).chat(HELLO)


async def test_llama_cpp_pythons_empty_stream_is_asked_again_for_its_reason(
        fake_llm, fake_profile):
    # A prompt over its window: the stream opens (200) and ends with nothing at all; the reason
    # is only in the server's log. Unstreamed, the same request gets a 400 that says so.
    fake_llm.script(BrokenStream(), LLAMA_CPP_PY_TOO_LONG)
    with pytest.raises(ContextTooLong, match="counted 6,010 tokens for a window of 4,096"):
        await OpenAIChatModel(fake_profile).chat(HELLO, on_token=lambda d: None)
    # (On a fresh connection: llama-cpp-python's broken one drops the next request, which
    # tests/test_llm_client_embedded.py sees; this server closes every stream's anyway.)
    assert [bool(r.get("stream")) for r in fake_llm.requests] == [True, False]


async def test_an_empty_stream_that_answers_unstreamed_still_streams_its_words(
        fake_llm, fake_profile):
    fake_llm.script(BrokenStream(), Reply(text="Here it is."), Reply(text="streamed again"))
    tokens: list[str] = []
    model = OpenAIChatModel(fake_profile)
    assert (await model.chat(HELLO, on_token=tokens.append)).text == "Here it is."
    assert tokens == ["Here it is."]
    # A chat turn's empty stream says nothing about tool turns: those still stream.
    await model.chat(HELLO, tools=[WEATHER_TOOL], on_token=tokens.append)
    assert fake_llm.requests[2]["stream"]


async def test_a_context_error_inside_a_stream_is_reported_as_what_it_is(
        fake_llm, fake_profile, monkeypatch):
    # Servers that check late send the error as an event of the open stream.
    import tests.fake_openai as fake

    error = {"error": {"message": "the request exceeds the available context size, try "
                                  "increasing it", "type": "exceed_context_size_error",
                       "code": 400, "n_prompt_tokens": 5000, "n_ctx": 4096}}
    monkeypatch.setattr(fake, "chunks", lambda reply, include_usage=True: [error])
    fake_llm.script(Reply(text="unused"))
    with pytest.raises(ContextTooLong, match="counted 5,000 tokens for a window of 4,096"):
        await OpenAIChatModel(dataclasses.replace(fake_profile, retries=0)).chat(
            HELLO, on_token=lambda d: None)


def test_a_model_says_its_profiles_window():
    from agentlab.llm.replay import ReplayModel
    from agentlab.llm.types import DEFAULT_CONTEXT_TOKENS, ContextWindow
    from agentlab.profiles import resolve_url

    profile = ProfileConfig(name="p", base_url="http://x/v1", model="m", max_tokens=256)
    assert OpenAIChatModel(profile).window == ContextWindow(DEFAULT_CONTEXT_TOKENS, 256)
    sized = dataclasses.replace(profile, context_tokens=32_000)
    assert OpenAIChatModel(sized).window.tokens == 32_000
    # A replay fits as the recorded run did, with the role's window.
    assert ReplayModel([], OpenAIChatModel(sized)).window.tokens == 32_000
    # A snapshot frozen before profiles had a window: the embedded model's is known.
    old = ProfileConfig(name="Local SmolLM2", base_url="", model="")
    assert resolve_url(old).context_tokens == 4096
    assert resolve_url(profile).context_tokens is None


@pytest.mark.parametrize("body", [
    b'{"choices": [{"message": "x"}]}',
    b'{"choices": [{"message": {"content": 42}}]}',
    b'{"choices": [{"message": {"tool_calls": [{"function": "calculator"}]}}]}',
])
async def test_a_reply_of_the_wrong_shape_is_a_bad_response_not_a_crash(body):
    # A run catches LLMError: an AttributeError from a garbled reply would fail it as a bug.
    server = RawServer(body)
    try:
        profile = ProfileConfig(name="odd", base_url=server.base_url, model="m", retries=0)
        with pytest.raises(BadResponse, match="not a chat completion this client can read"):
            await OpenAIChatModel(profile).chat(HELLO)
    finally:
        server.close()


TEXT_REACT = {"type": "react_text", "final": False,
              "labels": {"thought": ["Thought"], "action": ["Action"],
                         "action_input": ["Action Input"], "final_answer": ["Final Answer"]},
              "tools": [{"name": "get_weather",
                         "parameters": WEATHER_TOOL["function"]["parameters"]}]}


@pytest.mark.parametrize(("fmt", "must_have", "must_not"), [
    # Text ReAct: a turn that must act has no Final Answer branch.
    (TEXT_REACT, ['root ::= thought-label thought "\\n" (act)\n',
                  'act ::= action-label ("get_weather" "\\n" input-label args0)'],
     "Final Answer"),
    # A ReWOO plan: numbered steps, each one of the agent's tools or LLM.
    ({"type": "rewoo_plan", "tools": ["get_weather", "LLM"], "max_steps": 2},
     ["root ::= step1\n", 'tool ::= "get_weather" | "LLM"'], "step3"),
    # A Self-Ask turn that must ask a follow-up.
    ({"type": "self_ask", "labels": {}, "first": False, "final": False},
     ["root ::= follow\n", 'follow ::= ("Follow up: ") line'], "answer"),
])
async def test_our_own_formats_become_a_grammar_only_where_the_embedded_model_answers(
        fake_llm, fake_profile, fmt, must_have, must_not):
    # The embedded model (model "") is sent the shape as a llama.cpp grammar; any other server
    # gets the turn without our own format, which it would refuse.
    fake_llm.script(Reply(text="x"), Reply(text="y"))
    await OpenAIChatModel(dataclasses.replace(fake_profile, model="")).chat(
        HELLO, response_format=fmt)
    await OpenAIChatModel(fake_profile).chat(HELLO, response_format=fmt)
    embedded, other = fake_llm.requests
    assert "response_format" not in embedded and "response_format" not in other
    assert "grammar" not in other
    assert all(part in embedded["grammar"] for part in must_have), embedded["grammar"]
    assert must_not not in embedded["grammar"]



@pytest.fixture
def https_model(tmp_path):
    """An OpenAI-compatible endpoint over HTTPS with a certificate of its own (self-signed for
    127.0.0.1): (its base URL, the certificate's file)."""
    import http.server
    import json
    import ssl
    import subprocess
    import threading

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    reply = json.dumps({"id": "1", "object": "chat.completion", "model": "m", "choices": [
        {"index": 0, "finish_reason": "stop",
         "message": {"role": "assistant", "content": "over TLS"}}]}).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"https://127.0.0.1:{server.server_address[1]}/v1", cert
    server.shutdown()
    server.server_close()


async def test_an_https_endpoint_is_trusted_as_the_sdks_own_client_would_trust_it(
        https_model, monkeypatch):
    """Its certificate checked against the same store as the openai SDK's httpx client
    (certifi's, or SSL_CERT_FILE): refused with a sentence that says why, then trusted."""
    from agentlab.llm import wire

    base_url, cert = https_model
    profile = ProfileConfig(name="tls", base_url=base_url, model="m", retries=0)
    wire.ssl_context.cache_clear()
    with pytest.raises(EndpointUnreachable, match="TLS certificate is not trusted") as info:
        await OpenAIChatModel(profile).chat(HELLO)
    assert "certificate verify failed" in str(info.value) and "SSL_CERT_FILE" in str(info.value)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    wire.ssl_context.cache_clear()
    try:
        assert (await OpenAIChatModel(profile).chat(HELLO)).text == "over TLS"
    finally:
        wire.ssl_context.cache_clear()


async def test_a_new_model_client_loads_no_certificates(fake_llm, fake_profile, monkeypatch):
    """Loading a trust store takes 30–170 ms of CPU on the event loop, and every call in
    flight there waits for it: the process's one TLS context serves each client made (a
    model's first call, and each after a connection error), the SDK's httpx client's too."""
    from agentlab.llm import wire

    wire.ssl_context()  # the process's own, made once (at start-up in a server: asgi.py)
    loaded = []
    load = ssl.SSLContext.load_verify_locations

    def counted(self, *args, **kwargs):
        loaded.append(args or kwargs)
        return load(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    fake_llm.script(Reply(text="no stall"))
    assert (await OpenAIChatModel(fake_profile).chat(HELLO)).text == "no stall"
    assert loaded == []


async def test_a_login_in_the_base_url_is_sent_as_basic_auth(fake_llm, fake_profile):
    """As the SDK's httpx client does: a server behind a proxy that asks for a login."""
    import base64

    fake_llm.script(Reply(text="let in"))
    url = fake_profile.base_url.replace("http://", "http://agent:s3cret@")
    result = await OpenAIChatModel(dataclasses.replace(fake_profile, base_url=url)).chat(HELLO)
    assert result.text == "let in"
    sent = {k.lower(): v for k, v in fake_llm.headers[0].items()}
    assert sent["authorization"] == "Basic " + base64.b64encode(b"agent:s3cret").decode()
