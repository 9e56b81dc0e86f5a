"""Plain data of the LLM layer: profiles, tool calls, usage, results, the ChatModel protocol."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

TokenCallback = Callable[[str], Awaitable[None] | None]
DEFAULT_CONTEXT_TOKENS = 8192  # a profile's context window when it names none


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class ContextWindow:
    """What a model reads at most (prompt and reply) and the reply length its profile asks for;
    the runtime fits each prompt to it (agentlab/runtime/window.py)."""

    tokens: int = DEFAULT_CONTEXT_TOKENS
    max_tokens: int | None = None


@dataclass(frozen=True, kw_only=True)
class ProfileConfig:
    """A frozen copy of a ModelProfile row (no key: only the name of its variable)."""

    name: str
    base_url: str
    model: str
    api_key_env: str = ""
    temperature: float | None = None
    max_tokens: int | None = None
    context_tokens: int | None = None  # None: DEFAULT_CONTEXT_TOKENS
    timeout_s: float = 60.0
    retries: int = 2
    price_in_per_m: float = 0.0
    price_out_per_m: float = 0.0
    fallback: ProfileConfig | None = None
    backoff_s: float = 0.5  # first retry delay; doubles each time, capped at 8 s
    # Send `tool` messages as user messages ("Result of get_weather: ..."): llama.cpp's
    # chatml-function-calling template silently drops them. None = only for the embedded model.
    tool_results_as_user: bool | None = None

    @property
    def window(self) -> ContextWindow:
        return ContextWindow(self.context_tokens or DEFAULT_CONTEXT_TOKENS, self.max_tokens)

    def cost(self, usage: Usage) -> float:
        return (usage.prompt_tokens * self.price_in_per_m
                + usage.completion_tokens * self.price_out_per_m) / 1_000_000


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any] | None  # None when raw_arguments is not a JSON object
    raw_arguments: str  # always kept, so a malformed call can be shown and fed back
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class ChatResult:
    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    latency_ms: float = 0.0
    ttft_ms: float | None = None
    model: str = ""
    profile: str = ""  # the profile that answered (a fallback shows here)
    attempts: int = 1
    cost_usd: float = 0.0
    usage_estimated: bool = False  # the server reported no usage (llama.cpp streams): counted here

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChatResult:
        calls = [ToolCall(**c) for c in data.get("tool_calls") or []]
        usage = Usage(**(data.get("usage") or {}))
        return cls(**{**data, "tool_calls": calls, "usage": usage})


class ChatModel(Protocol):
    """What a paradigm calls: one chat completion (streamed to `on_token` when given). A model
    may also say its `window` (a ContextWindow); the runtime fits prompts only to a known one."""

    profile_name: str

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
    ) -> ChatResult: ...
