"""The wire under `OpenAIChatModel`: shared openai SDK clients, one completion, one stream.

Two costs of the SDK are paid once instead of per call (measured in `manage.py bench_live`):
- An `AsyncOpenAI` took ~30 ms of CPU to build, most of it its own TLS context: now every client
  has the process's one (`wire.ssl_context`), and every model of every run on one event loop
  shares one client per (base URL, key, timeout), so its pooled keep-alive connections are
  shared too.
- `chat.completions.create` walks every message of the request through the SDK's TypedDict
  transform (~5 ms for a 20-message conversation, growing with it) to convert values our
  requests never hold: they are plain JSON already. The body is sent as it is, on aiohttp
  (agentlab/llm/wire.py: ~0.6 ms of CPU a call less than the SDK's httpx), with the URL and
  headers the SDK builds for the request (made once per client) and the SDK's errors
  (`APIStatusError`, `APIConnectionError`, …) and SSE parsing (`_send`): past the SDK's
  per-request pipeline, which cost ~0.5 ms of CPU a call (the gateway's agents wait for it).
  Replies and chunks are read as the JSON objects they are, without a pydantic model each.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx2 as httpx
import openai

from agentlab.llm import wire
from agentlab.llm.errors import BadResponse
from agentlab.llm.types import ChatResult, TokenCallback, ToolCall, Usage


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


class ClientPool:
    """One `AsyncOpenAI` per (base URL, key, timeout) and event loop, shared by all models.

    Clients are bound to the loop that made them (their connections are), so each loop has its
    own; a loop's clients go when the loop is collected."""

    def __init__(self) -> None:
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop,
                                               dict[tuple[str, str, float], openai.AsyncOpenAI]]
        self._loops = weakref.WeakKeyDictionary()

    def get(self, base_url: str, key: str, timeout_s: float) -> openai.AsyncOpenAI:
        clients = self._loops.setdefault(asyncio.get_running_loop(), {})
        slot = (base_url, key, timeout_s)
        if (client := clients.get(slot)) is None:
            # Never the SDK's own OPENAI_API_KEY lookup: a local endpoint must not receive a
            # key meant for another service. max_retries=0: retries are ours, so counted.
            # The process's one TLS context (wire.ssl_context), not one loaded per client.
            client = clients[slot] = openai.AsyncOpenAI(
                base_url=base_url, api_key=key, timeout=timeout_s, max_retries=0,
                http_client=openai.DefaultAsyncHttpxClient(verify=wire.ssl_context()))
        return client

    def drop(self, base_url: str, key: str, timeout_s: float) -> None:
        """Forget the client (after a connection error, so the next call starts afresh). Other
        runs may still be reading from it: it is closed once their requests have timed out."""
        loop = asyncio.get_running_loop()
        client = self._loops.get(loop, {}).pop((base_url, key, timeout_s), None)
        if client is not None:
            loop.call_later(timeout_s + 1, lambda: loop.create_task(_close(client)))


async def _close(client: openai.AsyncOpenAI) -> None:
    await wire.close(client)
    await client.close()


POOL = ClientPool()


@contextlib.contextmanager
def _readable() -> Iterator[None]:
    """A reply of the wrong shape (a string where an object goes, a list for a number) is the
    endpoint's fault: a BadResponse that says so, never an AttributeError in a run."""
    try:
        yield
    except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:
        raise BadResponse(f"the endpoint's reply is not a chat completion this client can read "
                          f"({type(exc).__name__}: {str(exc)[:120]})") from None


async def complete(client: openai.AsyncOpenAI, body: dict[str, Any]) -> ChatResult:
    """One unstreamed completion, read as the JSON object it is (as stream chunks are)."""
    data = await _post(client, body)
    with _readable():
        return from_response(data)


async def _post(client: openai.AsyncOpenAI, body: dict[str, Any]) -> Any:
    """`client.post("/chat/completions", body=body, cast_to=object)`, leaner (`_send`)."""
    response = await _send(client, body, stream=False)
    try:
        return json.loads(response.content)
    except ValueError:
        raise BadResponse(f"the endpoint's reply is not JSON: {response.text[:120]!r}") from None


async def _send(client: openai.AsyncOpenAI, body: dict[str, Any], *, stream: bool
                ) -> httpx.Response:
    """One request with the URL and headers the SDK builds for it and the SDK's errors, on
    aiohttp (agentlab/llm/wire.py). The SDK's request pipeline around it (options, header
    merging, retry and auth wrappers: ~0.5 ms of CPU a call) is work a gateway call waits
    for, and the retries are ours anyway (max_retries=0)."""
    data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    try:
        return await wire.post(client, data, stream=stream)
    except httpx.TimeoutException as exc:
        raise openai.APITimeoutError(request=exc.request) from exc
    except httpx.HTTPError as exc:
        raise openai.APIConnectionError(request=exc.request) from exc


async def stream(client: openai.AsyncOpenAI, body: dict[str, Any], on_token: TokenCallback,
                 *, usage: bool) -> ChatResult | None:
    """Stream one completion into a ChatResult; None when the stream held nothing at all."""
    started = time.perf_counter()
    extra = {"stream_options": {"include_usage": True}} if usage else {}
    # Chunks as the JSON objects they are (AsyncStream[object]): the SDK still parses the
    # server-sent events and raises the errors a stream carries, but skips building a pydantic
    # model per chunk, which was most of the client's CPU per streamed call.
    response = await _send(client, {**body, "stream": True, **extra}, stream=True)
    chunks = openai.AsyncStream(cast_to=object, response=response, client=client)
    got = _Stream()
    text: list[str] = []
    ttft = None
    async with chunks:
        async for chunk in chunks:
            with _readable():
                content, started_output = got.take(chunk)
            if started_output:
                ttft = ttft or (time.perf_counter() - started) * 1000
            if content:
                text.append(content)
                await emit(on_token, content)
    calls, finish, model, reported = got.calls, got.finish, got.model, got.usage
    if not (text or calls or finish):
        return None
    if finish is None:  # every compatible server ends with a finish reason: this was cut short
        raise BadResponse(f"the stream broke off after {len(''.join(text))} characters",
                          retryable=True)
    tool_calls = [parse_tool_call(c["id"] or f"call_{i}", c["name"], c["args"])
                  for i, c in sorted(calls.items())]
    estimated = reported is None
    if reported is None:  # llama.cpp's server sends no usage in streams: estimate, and say so
        sent = json.dumps([body["messages"], body.get("tools")], ensure_ascii=False)
        said = "".join(text) + "".join(c["name"] + c["args"] for c in calls.values())
        reported = Usage(_estimate_tokens(sent), _estimate_tokens(said))
    return ChatResult(text="".join(text), tool_calls=tool_calls, finish_reason=finish,
                      usage=reported, ttft_ms=ttft, model=model or body["model"],
                      usage_estimated=estimated)


@dataclass
class _Stream:
    """What a stream's chunks said so far, but the text (the caller streams that on)."""

    calls: dict[int, dict[str, str]] = field(default_factory=dict)
    finish: str | None = None
    model: str | None = None
    usage: Usage | None = None

    def take(self, chunk: Any) -> tuple[str, bool]:
        """Read one chunk: (its text, whether it carried output at all)."""
        if not isinstance(chunk, dict):
            raise BadResponse(f"the stream sent {str(chunk)[:80]!r}, not a JSON object",
                              retryable=True)
        self.model = chunk.get("model") or self.model
        self.usage = _usage(chunk) or self.usage
        content, output = "", False
        for choice in (chunk.get("choices") or [])[:1]:
            delta = choice.get("delta") or {}
            self.finish = choice.get("finish_reason") or self.finish
            content, deltas = delta.get("content") or "", delta.get("tool_calls")
            if not isinstance(content, str):
                raise TypeError(f"content is {type(content).__name__}, not text")
            output = bool(content or deltas)
            for tc in deltas or []:
                if not isinstance(tc, dict):
                    continue
                slot = self.calls.setdefault(tc.get("index") or 0,
                                             {"id": "", "name": "", "args": ""})
                slot["id"] = tc.get("id") or slot["id"]
                if function := tc.get("function"):
                    # OpenAI sends the name once; llama.cpp repeats it in every delta.
                    name = function.get("name") or ""
                    if name != slot["name"]:
                        slot["name"] += name
                    slot["args"] += function.get("arguments") or ""
        return content, output


async def emit(on_token: TokenCallback, delta: str) -> None:
    maybe = on_token(delta)
    if inspect.isawaitable(maybe):
        await maybe


def from_response(data: Any) -> ChatResult:
    choices = data.get("choices") if isinstance(data, dict) else None
    if not choices or not isinstance(choices[0], dict):
        raise BadResponse("the endpoint answered without any choice")
    choice = choices[0]
    message = choice.get("message") or {}
    calls = [parse_tool_call(tc.get("id") or f"call_{i}", function.get("name") or "",
                             function.get("arguments") or "")
             for i, tc in enumerate(message.get("tool_calls") or [])
             if isinstance(tc, dict) and (function := tc.get("function"))]
    return ChatResult(text=_text(message.get("content")), tool_calls=calls,
                      finish_reason=choice.get("finish_reason"), usage=_usage(data) or Usage(),
                      model=data.get("model") or "")


def _text(content: Any) -> str:
    """A reply's content as text: a string, or the text of content parts; else a shape error."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):  # content parts: [{"type": "text", "text": …}] or strings
        return "".join(p if isinstance(p, str) else str(p.get("text") or "") for p in content)
    raise TypeError(f"content is {type(content).__name__}, not text")


def _usage(data: dict[str, Any]) -> Usage | None:
    """The usage a response or a stream chunk reports, if any."""
    if not isinstance(usage := data.get("usage"), dict):
        return None
    return Usage(_count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens")))


def _count(value: Any) -> int:
    """A token count as a whole number ≥ 0 (a server's null, string or negative: 0)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _estimate_tokens(text: str) -> int:
    return max(1, round(len(text) / 4)) if text else 0
