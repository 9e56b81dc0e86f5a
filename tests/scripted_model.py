"""ScriptedModel: a ChatModel that answers from a script.

A scripted model is right for testing a paradigm's control flow (which steps, in which order, what
is sent back to the model after an error); it says nothing about whether a real model would
follow the prompts. Use the embedded SmolLM2 tests for that.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import itertools
import json
from collections.abc import Callable, Sequence
from typing import Any

from agentlab.llm.types import ChatResult, ToolCall, Usage

_ids = itertools.count(1)

# One scripted reply: a text, a ready ChatResult, an exception to raise, or a callable
# (request) -> any of those, for replies that depend on what was asked.
Reply = str | ChatResult | BaseException | Callable[[dict[str, Any]], Any]


def call(name: str, arguments: dict[str, Any] | None = None, *, raw: str | None = None,
         error: str | None = None, id: str | None = None) -> ToolCall:
    """A tool call as a model would send it; pass `raw`+`error` for malformed arguments."""
    arguments = {} if arguments is None and error is None else arguments
    return ToolCall(id=id or f"call_{next(_ids)}", name=name, arguments=arguments,
                    raw_arguments=raw if raw is not None else json.dumps(arguments),
                    error=error)


def reply(text: str = "", *tool_calls: ToolCall, prompt_tokens: int = 10,
          completion_tokens: int = 5, cost_usd: float = 0.0, model: str = "scripted-model",
          finish_reason: str | None = None) -> ChatResult:
    """A ChatResult with `text` and/or `tool_calls`."""
    return ChatResult(
        text=text, tool_calls=list(tool_calls),
        finish_reason=finish_reason or ("tool_calls" if tool_calls else "stop"),
        usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens),
        latency_ms=1.0, ttft_ms=0.5, model=model, profile="scripted", attempts=1,
        cost_usd=cost_usd,
    )


class ScriptedModel:
    """Answers each chat() with the next scripted reply; records every request in `requests`."""

    def __init__(self, replies: Sequence[Reply] | Callable[[dict[str, Any]], Any], *,
                 profile_name: str = "scripted", delay_s: float = 0.0) -> None:
        self.profile_name = profile_name
        self.delay_s = delay_s
        self.requests: list[dict[str, Any]] = []
        self._script = replies if callable(replies) else list(replies)

    async def chat(self, messages: list[dict[str, Any]], *, tools: list | None = None,
                   tool_choice: Any = None, response_format: dict | None = None,
                   stop: list[str] | None = None, temperature: float | None = None,
                   max_tokens: int | None = None,
                   on_token: Callable[[str], Any] | None = None) -> ChatResult:
        request = copy.deepcopy({"messages": messages, "tools": tools, "tool_choice": tool_choice,
                                 "response_format": response_format, "stop": stop,
                                 "temperature": temperature, "max_tokens": max_tokens})
        self.requests.append(request)
        if callable(self._script):
            item = self._script(request)
        else:
            index = len(self.requests) - 1
            if index >= len(self._script):
                raise AssertionError(f"ScriptedModel ran out of replies at call {index + 1}")
            item = self._script[index]
        if callable(item) and not isinstance(item, ChatResult):
            item = item(request)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if isinstance(item, BaseException):
            raise item
        result = reply(item) if isinstance(item, str) else item
        if on_token is not None:
            for piece in _pieces(result.text or ""):
                maybe = on_token(piece)
                if inspect.isawaitable(maybe):
                    await maybe
        return result

    @property
    def last_messages(self) -> list[dict[str, Any]]:
        return self.requests[-1]["messages"]


def _pieces(text: str) -> list[str]:
    # Word-sized pieces with their spaces, so "".join(pieces) == text, like a real stream.
    out, current = [], ""
    for ch in text:
        current += ch
        if ch == " ":
            out.append(current)
            current = ""
    return [*out, current] if current else out


def make_context(model: Any, tools: Sequence[Any] = (), *, policies: dict | None = None,
                 models: dict[str, Any] | None = None, **kwargs: Any) -> tuple[Any, Any]:
    """A RunContext over real ToolExecutor(tools) with a MemorySink: (ctx, sink); sub-runs
    find paradigms in the real registry."""
    from agentlab.paradigms import registry
    from agentlab.runtime.context import RunContext
    from agentlab.runtime.sinks import MemorySink
    from agentlab.tools.executor import ToolExecutor

    sink = MemorySink()
    executor = ToolExecutor({spec.name: spec for spec in tools}, policies)
    kwargs.setdefault("paradigms", registry)
    ctx = RunContext(models={"default": model, **(models or {})}, executor=executor, sink=sink,
                     **kwargs)
    return ctx, sink
