"""`OpenAIChatModel`: any OpenAI-compatible endpoint through the openai SDK, with our own
retries (so attempts are counted and visible), fallback profiles and token streaming."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import time
from typing import Any

import openai

from agentlab.llm.errors import BadResponse, ContextTooLong, LLMError, translate
from agentlab.llm.local_server import MODEL_NAME as DEFAULT_MODEL  # noqa: E402
from agentlab.llm.types import ChatResult, ProfileConfig, TokenCallback, ToolCall, Usage

MAX_BACKOFF_S = 8.0


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


class OpenAIChatModel:
    """A ChatModel for one profile (and its fallback chain)."""

    def __init__(self, profile: ProfileConfig) -> None:
        self.profile = profile
        self.profile_name = profile.name
        self._clients: dict[str, openai.AsyncOpenAI] = {}
        # Profiles whose server wants llama.cpp's {"type": "json_object", "schema": …} form.
        self._schema_as_json_object: set[str] = set()

    def _client(self, p: ProfileConfig) -> openai.AsyncOpenAI:
        if p.name not in self._clients:
            self._clients[p.name] = openai.AsyncOpenAI(
                base_url=p.base_url,
                # Never fall back to the SDK's own OPENAI_API_KEY lookup: a local endpoint must
                # not receive a key meant for another service.
                api_key=(os.environ.get(p.api_key_env) if p.api_key_env else None) or "not-needed",
                timeout=p.timeout_s,
                max_retries=0,  # retries are ours, so they are counted and recorded
            )
        return self._clients[p.name]

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
        request = {"messages": messages, "tools": tools, "tool_choice": tool_choice,
                   "response_format": response_format, "stop": stop,
                   "temperature": temperature, "max_tokens": max_tokens}
        attempts = 0
        profile: ProfileConfig | None = self.profile
        last: LLMError | None = None
        while profile is not None:
            for attempt in range(profile.retries + 1):
                attempts += 1
                try:
                    result = await self._once(profile, request, on_token)
                    return _with(result, attempts=attempts)
                except LLMError as exc:
                    last = exc
                    # A prompt that is too long is too long for the fallback as well, usually
                    # a smaller model: fail at once with the reason rather than spend calls.
                    if isinstance(exc, ContextTooLong):
                        raise
                    if not exc.retryable or attempt == profile.retries:
                        break
                    await asyncio.sleep(min(profile.backoff_s * 2**attempt, MAX_BACKOFF_S))
            profile = profile.fallback
        assert last is not None
        raise last

    async def _once(self, p: ProfileConfig, request: dict[str, Any],
                    on_token: TokenCallback | None) -> ChatResult:
        model = p.model or DEFAULT_MODEL
        kwargs: dict[str, Any] = {"model": model, "messages": request["messages"]}
        for key in ("tools", "tool_choice", "response_format", "stop"):
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
        started = time.perf_counter()
        try:
            result = await self._send(p, kwargs, on_token, started)
        except openai.APIStatusError as exc:
            # llama-cpp-python's server takes a schema only as {"type": "json_object",
            # "schema": …}; OpenAI and vLLM take "json_schema". Learn which, once per profile.
            converted = _as_json_object(kwargs.get("response_format"))
            if converted is kwargs.get("response_format") or "json_object" not in str(exc.body):
                raise self._error(exc, p, model) from None
            self._schema_as_json_object.add(p.name)
            kwargs["response_format"] = converted
            try:
                result = await self._send(p, kwargs, on_token, started)
            except openai.OpenAIError as exc2:
                raise self._error(exc2, p, model) from None
        except openai.OpenAIError as exc:
            raise self._error(exc, p, model) from None
        latency = (time.perf_counter() - started) * 1000
        return _with(result, latency_ms=latency, profile=p.name, cost_usd=p.cost(result.usage))

    async def _send(self, p: ProfileConfig, kwargs: dict[str, Any],
                    on_token: TokenCallback | None, started: float) -> ChatResult:
        if on_token is None:
            return _from_response(await self._client(p).chat.completions.create(**kwargs))
        return await self._stream(p, kwargs, on_token, started)

    @staticmethod
    def _error(exc: Exception, p: ProfileConfig, model: str) -> LLMError:
        return translate(exc, profile=p.name, base_url=p.base_url, model=model,
                         key_env=p.api_key_env, timeout_s=p.timeout_s)

    async def _stream(self, p: ProfileConfig, kwargs: dict[str, Any],
                      on_token: TokenCallback, started: float) -> ChatResult:
        stream = await self._client(p).chat.completions.create(
            **kwargs, stream=True, stream_options={"include_usage": True}
        )
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        finish = model = None
        usage = Usage()
        ttft = None
        async for chunk in stream:
            model = chunk.model or model
            if chunk.usage:
                usage = Usage(chunk.usage.prompt_tokens or 0, chunk.usage.completion_tokens or 0)
            for choice in chunk.choices:
                delta = choice.delta
                finish = choice.finish_reason or finish
                if delta.content:
                    if ttft is None:
                        ttft = (time.perf_counter() - started) * 1000
                    text.append(delta.content)
                    maybe = on_token(delta.content)
                    if inspect.isawaitable(maybe):
                        await maybe
                for tc in delta.tool_calls or []:
                    slot = calls.setdefault(tc.index, {"id": "", "name": "", "args": ""})
                    if ttft is None:
                        ttft = (time.perf_counter() - started) * 1000
                    slot["id"] = tc.id or slot["id"]
                    if tc.function:
                        slot["name"] += tc.function.name or ""
                        slot["args"] += tc.function.arguments or ""
        tool_calls = [parse_tool_call(c["id"] or f"call_{i}", c["name"], c["args"])
                      for i, c in sorted(calls.items())]
        return ChatResult(text="".join(text), tool_calls=tool_calls, finish_reason=finish,
                          usage=usage, ttft_ms=ttft, model=model or kwargs["model"])


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


def _as_json_object(fmt: Any) -> Any:
    """OpenAI's json_schema response format in llama.cpp's json_object form (else unchanged)."""
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return {"type": "json_object", "schema": fmt.get("json_schema", {}).get("schema", {})}
    return fmt


def _with(result: ChatResult, **changes: Any) -> ChatResult:
    import dataclasses

    return dataclasses.replace(result, **changes)
