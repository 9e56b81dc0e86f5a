"""`OpenAIChatModel`: any OpenAI-compatible endpoint through the openai SDK, with our own
retries (so attempts are counted and visible), fallback profiles and token streaming.

A few llama.cpp-server habits are met here by their symptoms, so the same code serves OpenAI,
vLLM, Ollama and the embedded model alike (each is a no-op where the server behaves)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import time
from collections.abc import Callable
from typing import Any

import openai

from agentlab.llm import gate, grammars, transport
from agentlab.llm.errors import (
    AuthenticationFailed,
    ContextTooLong,
    LLMError,
    translate,
)
from agentlab.llm.keys import key_variable_problem
from agentlab.llm.local_server import MODEL_NAME as DEFAULT_MODEL
from agentlab.llm.transport import parse_tool_call
from agentlab.llm.types import ChatResult, ContextWindow, ProfileConfig, TokenCallback

__all__ = ["OpenAIChatModel", "parse_tool_call"]

MAX_BACKOFF_S = 8.0
# llama.cpp's chatml-function-calling answers an "auto" turn that chose to talk with nothing (or
# a bare "functions.<name>:"): the grammar of its message branch admits nothing else.
_EMPTY_AUTO_REPLY = re.compile(r"\s*(functions\.[\w.-]*:?)?\s*")


@dataclasses.dataclass
class _Tally:
    http: int = 0  # HTTP requests sent for one chat() call


class OpenAIChatModel:
    """A ChatModel for one profile (and its fallback chain). `gate_limit(profile)`: how many
    requests that profile's endpoint takes at a time (0: no limit; None: never limited), the
    rest waiting their turn in order (agentlab/llm/gate.py)."""

    def __init__(self, profile: ProfileConfig, *,
                 gate_limit: Callable[[ProfileConfig], int] | None = None) -> None:
        self.profile = profile
        self.profile_name = profile.name
        self.gate_limit = gate_limit
        self._schema_as_json_object: set[str] = set()  # llama.cpp's response_format dialect
        self._no_stream_options: set[str] = set()  # servers that refuse stream_options
        self._no_tool_streams: set[str] = set()  # servers that cannot stream a tool turn

    @property
    def window(self) -> ContextWindow:
        """The first profile's: a fallback with a smaller window says so itself (ContextTooLong)."""
        return self.profile.window

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        response_format: dict[str, Any] | None = None,
        stop: list[str] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        on_token: TokenCallback | None = None,
        extra: dict[str, Any] | None = None,
    ) -> ChatResult:
        """One completion; retries transient failures, then tries the fallback profiles.

        `latency_ms` covers the whole call (retries, backoff, fallbacks), `ttft_ms` counts from
        the start of the attempt that answered. A stream that broke off is retried from the
        start, so after a retry `on_token` sees the new attempt's deltas from its beginning."""
        request = {"messages": messages, "tools": tools, "tool_choice": tool_choice,
                   "response_format": response_format, "stop": stop,
                   "temperature": temperature, "max_tokens": max_tokens, "extra": extra}
        started = time.perf_counter()
        tally = _Tally()
        failures: list[LLMError] = []  # the last error of each profile tried
        profile: ProfileConfig | None = self.profile
        seen: set[str] = set()
        while profile is not None and profile.name not in seen:
            seen.add(profile.name)
            for attempt in range(profile.retries + 1):
                try:
                    result = await self._once(profile, request, on_token, tally)
                except LLMError as exc:
                    del failures[len(seen) - 1:]  # a retry's error replaces the one before
                    failures.append(exc)
                    exc.attempts = tally.http
                    # A prompt that is too long is too long for the fallback as well, usually
                    # a smaller model: fail at once with the reason rather than spend calls.
                    if isinstance(exc, ContextTooLong):
                        raise
                    if not exc.retryable or attempt == profile.retries:
                        break  # auth, unknown model, spent retries: the next profile may do
                    await asyncio.sleep(_backoff(profile, attempt, exc))
                    continue
                latency = (time.perf_counter() - started) * 1000
                return dataclasses.replace(result, attempts=tally.http, latency_ms=latency)
            profile = profile.fallback
        last = failures[-1]
        if len(failures) > 1:  # say why the whole chain failed, not only its last link
            last.args = (f"{last} — before that: " + "; ".join(map(str, failures[:-1])),)
        raise last

    async def _once(self, p: ProfileConfig, request: dict[str, Any],
                    on_token: TokenCallback | None, tally: _Tally) -> ChatResult:
        model = p.model or DEFAULT_MODEL
        key = _key(p)
        kwargs = self._kwargs(p, model, request)
        limit = self.gate_limit(p) if self.gate_limit is not None else 0
        try:
            # Sent only once the endpoint has room (a wait for its turn is announced, and is
            # not on this request's timeout); held until the whole reply is read.
            async with gate.through(p.base_url, limit):
                result = await self._answer(p, kwargs, on_token, tally, key)
        except LLMError as exc:
            exc.profile, exc.base_url = exc.profile or p.name, exc.base_url or p.base_url
            raise
        except openai.OpenAIError as exc:
            if isinstance(exc, openai.APIConnectionError):  # the next call starts afresh
                transport.POOL.drop(p.base_url, key, p.timeout_s)
            raise translate(exc, profile=p.name, base_url=p.base_url, model=model,
                            key_env=p.api_key_env, timeout_s=p.timeout_s, secret=key) from None
        return dataclasses.replace(result, profile=p.name, cost_usd=p.cost(result.usage))

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        """Another endpoint of the first profile (the gateway's embeddings), the body sent as
        it is but for the profile's model name: the same key, pooled client and errors as a
        chat call, no retries."""
        p = self.profile
        model = p.model or DEFAULT_MODEL
        key = _key(p)
        client = transport.POOL.get(p.base_url, key, p.timeout_s)
        try:
            return await client.post(path, body={**body, "model": model}, cast_to=object)
        except openai.OpenAIError as exc:
            raise translate(exc, profile=p.name, base_url=p.base_url, model=model,
                            key_env=p.api_key_env, timeout_s=p.timeout_s, secret=key) from None

    def _kwargs(self, p: ProfileConfig, model: str, request: dict[str, Any]) -> dict[str, Any]:
        as_user = p.tool_results_as_user
        if as_user is None:  # automatic: our llama.cpp template drops `tool` messages
            as_user = model == DEFAULT_MODEL
        # `extra`: parameters a caller passes through as they are (the gateway's top_p, seed…)
        kwargs: dict[str, Any] = {**(request.get("extra") or {}), "model": model,
                                  "messages": _wire_messages(request["messages"], as_user)}
        if request["tools"]:
            kwargs["tools"] = request["tools"]
            # "auto" is OpenAI's default when tools are offered; llama.cpp ignores the tools
            # unless it is said.
            kwargs["tool_choice"] = request["tool_choice"] or "auto"
        for key in ("response_format", "stop"):
            if request[key]:
                kwargs[key] = request[key]
        fmt = kwargs.get("response_format") or {}
        if (to_grammar := grammars.OWN_FORMATS.get(fmt.get("type"))) is not None:
            # A text shape of ours (text ReAct, a ReWOO plan): a grammar for the embedded
            # model; other servers get the turn as it is, and the parser reads what they write.
            del kwargs["response_format"]
            if model == DEFAULT_MODEL and (gbnf := to_grammar(fmt)):
                kwargs["grammar"] = gbnf
        temperature = request["temperature"] if request["temperature"] is not None \
            else p.temperature
        # The call's own length (per call kind) within the profile's, which caps every call.
        max_tokens = min(filter(None, (request["max_tokens"], p.max_tokens)), default=None)
        if temperature is not None:
            kwargs["temperature"] = temperature
        if max_tokens:
            kwargs["max_tokens"] = max_tokens
        # The embedded server's dialect is known before the first call (no failed attempt); any
        # other server's is learnt from its first 422.
        if "response_format" in kwargs and (p.name in self._schema_as_json_object
                                            or model == DEFAULT_MODEL):
            kwargs["response_format"] = _as_json_object(kwargs["response_format"])
        return kwargs

    async def _answer(self, p: ProfileConfig, kwargs: dict[str, Any],
                      on_token: TokenCallback | None, tally: _Tally, key: str) -> ChatResult:
        try:
            result = await self._send(p, kwargs, on_token, tally, key)
        except openai.APIStatusError as exc:
            # llama-cpp-python's server takes a schema only as {"type": "json_object",
            # "schema": …}; OpenAI and vLLM take "json_schema". Learn which, once per profile.
            converted = _as_json_object(kwargs.get("response_format"))
            if converted is kwargs.get("response_format") or "json_object" not in str(exc.body):
                raise
            self._schema_as_json_object.add(p.name)
            kwargs = {**kwargs, "response_format": converted}
            result = await self._send(p, kwargs, on_token, tally, key)
        if (kwargs.get("tool_choice") == "auto" and not result.tool_calls
                and result.finish_reason in ("stop", None)
                and _EMPTY_AUTO_REPLY.fullmatch(result.text)):
            # The model chose to talk but the server dropped its words: ask it to talk.
            result = await self._send(p, {**kwargs, "tool_choice": "none"}, on_token, tally, key)
        return result

    async def _send(self, p: ProfileConfig, kwargs: dict[str, Any],
                    on_token: TokenCallback | None, tally: _Tally, key: str) -> ChatResult:
        tally.http += 1
        client = transport.POOL.get(p.base_url, key, p.timeout_s)
        if on_token is None:
            return await transport.complete(client, kwargs)
        if kwargs.get("tools") and p.name in self._no_tool_streams:
            # Learnt below: don't open a stream the server will break (and keep generating
            # into, since llama.cpp cannot interrupt a request); ask unstreamed at once.
            return await _complete_then_emit(client, kwargs, on_token)
        try:
            result = await transport.stream(client, kwargs, on_token,
                                            usage=p.name not in self._no_stream_options)
        except openai.BadRequestError as exc:
            if "stream_options" not in str(exc) or p.name in self._no_stream_options:
                raise
            self._no_stream_options.add(p.name)
            tally.http += 1
            result = await transport.stream(client, kwargs, on_token, usage=False)
        if result is not None:
            return result
        # A stream that held nothing is how llama-cpp-python fails once the stream is open (a
        # prompt over its window, an automatic tool choice), leaving the connection unusable;
        # its reason is only in its log. Ask again unstreamed on a fresh connection: that gets
        # the answer or the server's own words (a 400 "maximum context length" and its counts).
        if kwargs.get("tools"):  # a tool turn: send this profile's unstreamed from now on
            self._no_tool_streams.add(p.name)
        transport.POOL.drop(p.base_url, key, p.timeout_s)
        tally.http += 1
        return await _complete_then_emit(transport.POOL.get(p.base_url, key, p.timeout_s),
                                         kwargs, on_token)


async def _complete_then_emit(client: openai.AsyncOpenAI, kwargs: dict[str, Any],
                              on_token: TokenCallback) -> ChatResult:
    result = await transport.complete(client, kwargs)
    if result.text:
        await transport.emit(on_token, result.text)
    return result


def _wire_messages(messages: list[dict[str, Any]], tool_results_as_user: bool) -> list[dict]:
    """The conversation as sent (the caller's list is left as it is, for the trace)."""
    names: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for message in messages:
        message = dict(message)
        if message.get("role") == "assistant":
            if message.get("content") is None:
                message["content"] = ""  # llama.cpp's server rejects null content (500)
            if "tool_calls" in message and not message["tool_calls"]:
                del message["tool_calls"]  # its template iterates whatever is there
            for call in message.get("tool_calls") or []:
                names[call.get("id", "")] = (call.get("function") or {}).get("name", "tool")
        elif message.get("role") == "tool" and tool_results_as_user:
            name = names.get(message.get("tool_call_id", ""), "the tool")
            content = message.get("content")
            content = content if isinstance(content, str) else json.dumps(content)
            message = {"role": "user", "content": f"Result of {name}: {content}"}
        out.append(message)
    return out


def _key(p: ProfileConfig) -> str:
    """The profile's key, from its variable (AuthenticationFailed when the name is not one
    this server may read: a snapshot may come from elsewhere)."""
    if problem := key_variable_problem(p.api_key_env):
        raise AuthenticationFailed(f"profile {p.name}: {problem}", profile=p.name,
                                   base_url=p.base_url)
    return (os.environ.get(p.api_key_env) if p.api_key_env else None) or "not-needed"


def _backoff(p: ProfileConfig, attempt: int, exc: LLMError) -> float:
    delay = min(p.backoff_s * 2**attempt, MAX_BACKOFF_S)
    if exc.retry_after_s:  # the server's own word, within our cap
        delay = max(delay, min(exc.retry_after_s, MAX_BACKOFF_S))
    return delay


def _as_json_object(fmt: Any) -> Any:
    """OpenAI's json_schema response format in llama.cpp's json_object form (else unchanged)."""
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return {"type": "json_object", "schema": fmt.get("json_schema", {}).get("schema", {})}
    return fmt
