"""The LLM layer (pure, no ORM): `from agentlab.llm import OpenAIChatModel, ProfileConfig, ...`."""

from __future__ import annotations

from agentlab.llm.client import OpenAIChatModel, parse_tool_call
from agentlab.llm.errors import (
    AuthenticationFailed,
    BadResponse,
    ContextTooLong,
    EndpointUnreachable,
    LLMError,
    LLMTimeout,
    RateLimited,
    ServerError,
    UnknownModel,
)
from agentlab.llm.local_server import (
    MODEL_NAME,
    LocalModelError,
    LocalModelServer,
    find_model_path,
    local_base_url,
)
from agentlab.llm.types import ChatModel, ChatResult, ProfileConfig, ToolCall, Usage

__all__ = [
    "MODEL_NAME", "AuthenticationFailed", "BadResponse", "ChatModel", "ChatResult",
    "ContextTooLong", "EndpointUnreachable", "LLMError", "LLMTimeout", "LocalModelError",
    "LocalModelServer", "OpenAIChatModel", "ProfileConfig", "RateLimited", "ServerError",
    "ToolCall", "UnknownModel", "Usage", "find_model_path", "local_base_url", "parse_tool_call",
]
