"""`OpenAIChatModel`: any OpenAI-compatible endpoint through the openai SDK, with our own
retries (so attempts are counted and visible), fallback profiles and token streaming.

A few llama.cpp-server habits are met here by their symptoms, so the same code serves OpenAI,
vLLM, Ollama and the embedded model alike (each is a no-op where the server behaves)."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import os
import re
import time
from typing import Any

import openai

from agentlab.llm.errors import BadResponse, ContextTooLong, LLMError, translate
from agentlab.llm.local_server import MODEL_NAME as DEFAULT_MODEL
from agentlab.llm.types import ChatResult, ProfileConfig, TokenCallback, ToolCall, Usage

MAX_BACKOFF_S = 8.0
# llama.cpp's chatml-function-calling answers an "auto" turn that chose to talk with nothing (or
# a bare "functions.<name>:"): the grammar of its message branch admits nothing else.
_EMPTY_AUTO_REPLY = re.compile(r"\s*(functions\.[\w.-]*:?)?\s*")


def parse_tool_call(call_id: str, name: str, raw: str) -> ToolCall:
    """A tool call with its arguments parsed; malformed JSON is kept raw with the reason."""
    try:
        args = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        return ToolCall(id=call_id, name=name, arguments=None, raw_arguments=raw,
                        error=f"malformed arguments for {name}: {exc}")
    if not isinstance(args, dict):
        return ToolCall(id=call_id, name=name, arguments=None, raw_arguments=raw,
                        error=f"arguments for {name} must be a JSON object, got {raw[:80]!r}")
    return ToolCall(id=call_id, name=name, arguments=args, raw_arguments=raw)


@dataclasses.dataclass
class _Tally:
    http: int = 0  # HTTP requests sent for one chat() call


class OpenAIChatModel:
    """A ChatModel for one profile (and its fallback chain)."""

    def __init__(self, profile: ProfileConfig) -> None:
        self.profile = profile
        self.profile_name = profile.name
        # (profile name, event loop) -> (key, client): pooled connections, rebuilt when the key
        # changes, dropped after a connection error so a retry starts on a fresh connection.
        self._clients: dict[tuple[str, int], tuple[str, openai.AsyncOpenAI]] = {}
        self._schema_as_json_object: set[str] = set()  # llama.cpp's response_format dialect
        self._no_stream_options: set[str] = set()  # servers that refuse stream_options
        self._no_tool_streams: set[str] = set()  # servers that cannot stream a tool turn

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
    ) -> ChatResult:
        """One completion; retries transient failures, then tries the fallback profiles.

        `latency_ms` covers the whole call (retries, backoff, fallbacks), `ttft_ms` counts from
        the start of the attempt that answered. A stream that broke off is retried from the
        start, so after a retry `on_token` sees the new attempt's deltas from its beginning."""
        request = {"messages": messages, "tools": tools, "tool_choice": tool_choice,
                   "response_format": response_format, "stop": stop,
                   "temperature": temperature, "max_tokens": max_tokens}
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

    async def aclose(self) -> None:
        """Close pooled connections (optional: they are closed when the model is dropped)."""
        clients, self._clients = self._clients, {}
        for _key, client in clients.values():
            await client.close()

    async def _once(self, p: ProfileConfig, request: dict[str, Any],
                    on_token: TokenCallback | None, tally: _Tally) -> ChatResult:
        model = p.model or DEFAULT_MODEL
        key = (os.environ.get(p.api_key_env) if p.api_key_env else None) or "not-needed"
        kwargs = self._kwargs(p, model, request)
        try:
            result = await self._answer(p, kwargs, on_token, tally, key)
        except LLMError as exc:
            exc.profile, exc.base_url = exc.profile or p.name, exc.base_url or p.base_url
            raise
        except openai.OpenAIError as exc:
            if isinstance(exc, openai.APIConnectionError):
                await self._drop_client(p)
            raise translate(exc, profile=p.name, base_url=p.base_url, model=model,
                            key_env=p.api_key_env, timeout_s=p.timeout_s, secret=key) from None
        return dataclasses.replace(result, profile=p.name, cost_usd=p.cost(result.usage))

    def _kwargs(self, p: ProfileConfig, model: str, request: dict[str, Any]) -> dict[str, Any]:
        as_user = p.tool_results_as_user
        if as_user is None:  # automatic: our llama.cpp template drops `tool` messages
            as_user = model == DEFAULT_MODEL
        kwargs: dict[str, Any] = {"model": model,
                                  "messages": _wire_messages(request["messages"], as_user)}
        if request["tools"]:
            kwargs["tools"] = request["tools"]
            # "auto" is OpenAI's default when tools are offered; llama.cpp ignores the tools
            # unless it is said.
            kwargs["tool_choice"] = request["tool_choice"] or "auto"
        for key in ("response_format", "stop"):
            if request[key]:
                kwargs[key] = request[key]
        temperature = request["temperature"] if request["temperature"] is not None \
            else p.temperature
        max_tokens = request["max_tokens"] or p.max_tokens
        if temperature is not None:
            kwargs["temperature"] = temperature
        if max_tokens:
            kwargs["max_tokens"] = max_tokens
        if p.name in self._schema_as_json_object:
            kwargs["response_format"] = _as_json_object(kwargs.get("response_format"))
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
        client = self._client(p, key)
        if on_token is None:
            return _from_response(await client.chat.completions.create(**kwargs))
        if kwargs.get("tools") and p.name in self._no_tool_streams:
            # Learnt below: don't open a stream the server will break (and keep generating
            # into, since llama.cpp cannot interrupt a request); ask unstreamed at once.
            result = _from_response(await client.chat.completions.create(**kwargs))
            if result.text:
                await _emit(on_token, result.text)
            return result
        try:
            result = await _stream(client, kwargs, on_token,
                                   usage=p.name not in self._no_stream_options)
        except openai.BadRequestError as exc:
            if "stream_options" not in str(exc) or p.name in self._no_stream_options:
                raise
            self._no_stream_options.add(p.name)
            tally.http += 1
            result = await _stream(client, kwargs, on_token, usage=False)
        if result is not None:
            return result
        if not kwargs.get("tools"):
            raise BadResponse(f"the stream from {p.base_url} (profile {p.name!r}) ended without "
                              "an answer", profile=p.name, base_url=p.base_url, retryable=True)
        # llama.cpp cannot stream an automatic tool choice: it opens the stream, fails, and
        # leaves the connection unusable. Ask again unstreamed, on a fresh connection, and
        # send this profile's tool turns unstreamed from now on.
        self._no_tool_streams.add(p.name)
        await self._drop_client(p)
        tally.http += 1
        result = _from_response(await self._client(p, key).chat.completions.create(**kwargs))
        if result.text:
            await _emit(on_token, result.text)
        return result

    def _client(self, p: ProfileConfig, key: str) -> openai.AsyncOpenAI:
        slot = (p.name, id(asyncio.get_running_loop()))
        held = self._clients.get(slot)
        if held is None or held[0] != key:
            # Never the SDK's own OPENAI_API_KEY lookup: a local endpoint must not receive a
            # key meant for another service. max_retries=0: retries are ours, so counted.
            client = openai.AsyncOpenAI(base_url=p.base_url, api_key=key, timeout=p.timeout_s,
                                        max_retries=0)
            self._clients[slot] = held = (key, client)
        return held[1]

    async def _drop_client(self, p: ProfileConfig) -> None:
        held = self._clients.pop((p.name, id(asyncio.get_running_loop())), None)
        if held is not None:
            await held[1].close()


async def _stream(client: openai.AsyncOpenAI, kwargs: dict[str, Any], on_token: TokenCallback,
                  *, usage: bool) -> ChatResult | None:
    """Stream one completion into a ChatResult; None when the stream held nothing at all."""
    started = time.perf_counter()
    extra = {"stream_options": {"include_usage": True}} if usage else {}
    stream = await client.chat.completions.create(**kwargs, stream=True, **extra)
    text: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    finish = model = None
    reported: Usage | None = None
    ttft = None
    async with stream:
        async for chunk in stream:
            model = chunk.model or model
            if chunk.usage:
                reported = Usage(chunk.usage.prompt_tokens or 0,
                                 chunk.usage.completion_tokens or 0)
            for choice in chunk.choices[:1]:
                delta = choice.delta
                finish = choice.finish_reason or finish
                if delta.content or delta.tool_calls:
                    ttft = ttft or (time.perf_counter() - started) * 1000
                if delta.content:
                    text.append(delta.content)
                    await _emit(on_token, delta.content)
                for tc in delta.tool_calls or []:
                    slot = calls.setdefault(tc.index, {"id": "", "name": "", "args": ""})
                    slot["id"] = tc.id or slot["id"]
                    if tc.function:
                        # OpenAI sends the name once; llama.cpp repeats it in every delta.
                        name = tc.function.name or ""
                        if name != slot["name"]:
                            slot["name"] += name
                        slot["args"] += tc.function.arguments or ""
    if not (text or calls or finish):
        return None
    if finish is None:  # every compatible server ends with a finish reason: this was cut short
        raise BadResponse(f"the stream broke off after {len(''.join(text))} characters",
                          retryable=True)
    tool_calls = [parse_tool_call(c["id"] or f"call_{i}", c["name"], c["args"])
                  for i, c in sorted(calls.items())]
    estimated = reported is None
    if reported is None:  # llama.cpp's server sends no usage in streams: estimate, and say so
        sent = json.dumps([kwargs["messages"], kwargs.get("tools")], ensure_ascii=False)
        said = "".join(text) + "".join(c["name"] + c["args"] for c in calls.values())
        reported = Usage(_estimate_tokens(sent), _estimate_tokens(said))
    return ChatResult(text="".join(text), tool_calls=tool_calls, finish_reason=finish,
                      usage=reported, ttft_ms=ttft, model=model or kwargs["model"],
                      usage_estimated=estimated)


async def _emit(on_token: TokenCallback, delta: str) -> None:
    maybe = on_token(delta)
    if inspect.isawaitable(maybe):
        await maybe


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


def _from_response(response: Any) -> ChatResult:
    if not getattr(response, "choices", None):
        raise BadResponse("the endpoint answered without any choice")
    choice = response.choices[0]
    message = choice.message
    calls = [parse_tool_call(tc.id or f"call_{i}", tc.function.name, tc.function.arguments or "")
             for i, tc in enumerate(message.tool_calls or []) if getattr(tc, "function", None)]
    usage = Usage(response.usage.prompt_tokens or 0, response.usage.completion_tokens or 0) \
        if response.usage else Usage()
    return ChatResult(text=message.content or "", tool_calls=calls,
                      finish_reason=choice.finish_reason, usage=usage, model=response.model or "")


def _backoff(p: ProfileConfig, attempt: int, exc: LLMError) -> float:
    delay = min(p.backoff_s * 2**attempt, MAX_BACKOFF_S)
    if exc.retry_after_s:  # the server's own word, within our cap
        delay = max(delay, min(exc.retry_after_s, MAX_BACKOFF_S))
    return delay


def _estimate_tokens(text: str) -> int:
    return max(1, round(len(text) / 4)) if text else 0


def _as_json_object(fmt: Any) -> Any:
    """OpenAI's json_schema response format in llama.cpp's json_object form (else unchanged)."""
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return {"type": "json_object", "schema": fmt.get("json_schema", {}).get("schema", {})}
    return fmt
