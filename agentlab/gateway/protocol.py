"""The OpenAI chat-completions wire, as the gateway reads and answers it (pure).

`parse_chat` reads a request body into a `ChatRequest` (or a `GatewayError` that says what is
wrong, in the error shape every OpenAI client reads: {"error": {"message", "type", "param",
"code"}}); `completion` and `chunks` write a reply as a chat.completion object or as the
server-sent events of a stream. Parameters the model's profile does not own (top_p, seed, …)
pass through as `extra`; what the gateway cannot honour (n > 1) is refused by name.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import Any

from agentlab.llm.errors import LLMError
from agentlab.llm.types import ChatResult

# Sent upstream as they are: sampling and bookkeeping the profile does not set.
PASSED_THROUGH = ("top_p", "seed", "presence_penalty", "frequency_penalty", "logit_bias",
                  "logprobs", "top_logprobs", "user", "parallel_tool_calls", "metadata",
                  "reasoning_effort", "service_tier", "store", "modalities", "prediction")
# Read by the gateway itself (the rest of the body is refused as unknown, naming the field).
OWN = ("model", "messages", "tools", "tool_choice", "response_format", "stop", "temperature",
       "max_tokens", "max_completion_tokens", "stream", "stream_options", "n", "functions",
       "function_call")
MODEL_CHARS = 200  # a route's model_name, a profile's name: no longer
ROLES = ("system", "developer", "user", "assistant", "tool", "function")
# The fields of a recorded llm step's request (agentlab.runtime.context: the same keys).
REQUEST_KEYS = ("messages", "tools", "tool_choice", "response_format", "stop", "temperature",
                "max_tokens")
# HTTP statuses of the gateway's own refusals and of what upstream answered (LLMError.kind).
STATUS_OF_KIND = {"auth": 502, "unknown_model": 404, "context_too_long": 400,
                  "rate_limited": 429, "timeout": 504, "unreachable": 502, "server": 502,
                  "bad_response": 502, "replay_mismatch": 409}


class GatewayError(Exception):
    """A request the gateway answers with an OpenAI-shaped error."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None,
                 retry: bool | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type = status, message, type
        self.param, self.code = param, code
        self.headers = dict(headers or {})
        if retry is not None:  # the openai SDKs read it before their own retry rules
            self.headers["x-should-retry"] = "true" if retry else "false"

    def body(self) -> dict[str, Any]:
        return error_body(self.message, type=self.type, param=self.param, code=self.code)


def error_body(message: str, *, type: str = "invalid_request_error", param: str | None = None,
               code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


@dataclass
class ChatRequest:
    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    stop: list[str] | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    stream: bool = False
    include_usage: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    # The grouping keys of `messages` (agentlab.gateway.sessions: the run is found by them,
    # the reply's key made from them), worked out once a call; a copy works them out again.
    keys: tuple[list[tuple[int, str]], str] | None = field(
        default=None, init=False, repr=False, compare=False)

    def recorded(self) -> dict[str, Any]:
        """What the llm step keeps as its input: the request fields of Agent Lab's own llm
        steps (so replay, fork, the playground and the diff read both alike), plus the
        passed-through parameters when there are any."""
        request = {key: getattr(self, key) for key in REQUEST_KEYS}
        if self.extra:
            request["params"] = dict(self.extra)
        return request

    def with_fields(self, edited: dict[str, Any]) -> ChatRequest:
        """This request with some of its recorded fields replaced (an edit at a hold)."""
        known = {k: v for k, v in edited.items() if k in REQUEST_KEYS}
        return ChatRequest(**{**{f.name: getattr(self, f.name) for f in fields(self) if f.init},
                              **known})


def upstream_error(exc: LLMError) -> GatewayError:
    """What the model's endpoint answered, as the OpenAI error a client expects (its key, if
    the message ever held it, was already taken out by agentlab.llm.errors.translate)."""
    status = STATUS_OF_KIND.get(exc.kind, 502)
    kind = {429: "rate_limit_error", 504: "timeout"}.get(status, "api_error")
    if status in (400, 404):
        kind = "invalid_request_error"
    headers = {"Retry-After": str(int(exc.retry_after_s))} if exc.retry_after_s else {}
    return GatewayError(status, f"The model's endpoint: {exc}", type=kind, code=exc.kind,
                        headers=headers)


def parse_chat(body: Any) -> ChatRequest:
    """A chat.completions request body (already JSON-decoded), checked field by field."""
    if not isinstance(body, dict):
        raise GatewayError(400, "The request body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise GatewayError(400, "'model' is required: the name of a model profile, or any "
                                "name the admin maps to one.", param="model")
    if len(model) > MODEL_CHARS:  # no name of a profile or route is longer
        raise GatewayError(400, f"'model' is at most {MODEL_CHARS} characters.", param="model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise GatewayError(400, "'messages' must be a non-empty list of messages.",
                           param="messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise GatewayError(400, f"messages[{i}] must be an object with a role "
                                    f"({', '.join(ROLES)}).", param=f"messages[{i}]")
    if unknown := sorted(set(body) - set(OWN) - set(PASSED_THROUGH)):
        raise GatewayError(400, f"Unknown parameter: {', '.join(unknown)}.", param=unknown[0],
                           code="unknown_parameter")
    if body.get("n") not in (None, 1):
        raise GatewayError(400, "The gateway answers one choice per request: leave 'n' at 1.",
                           param="n")
    tools = body.get("tools")
    if body.get("functions") and not tools:  # the legacy form, as tools
        tools = [{"type": "function", "function": f} for f in body["functions"]
                 if isinstance(f, dict)]
    if tools is not None and not (isinstance(tools, list)
                                  and all(isinstance(t, dict) for t in tools)):
        raise GatewayError(400, "'tools' must be a list of tool objects.", param="tools")
    stop = body.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    if stop is not None and not (isinstance(stop, list) and all(isinstance(s, str) for s in stop)):
        raise GatewayError(400, "'stop' must be a string or a list of strings.", param="stop")
    fmt = body.get("response_format")
    if fmt is not None and not isinstance(fmt, dict):
        raise GatewayError(400, "'response_format' must be an object.", param="response_format")
    temperature = _number(body, "temperature")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool)
                                   or max_tokens < 1):
        raise GatewayError(400, "'max_tokens' must be a whole number ≥ 1.", param="max_tokens")
    options = body.get("stream_options") or {}
    return ChatRequest(
        model=model.strip(), messages=messages, tools=tools or None,
        tool_choice=body.get("tool_choice", body.get("function_call")), response_format=fmt,
        stop=stop or None, temperature=temperature, max_tokens=max_tokens,
        stream=bool(body.get("stream")),
        include_usage=bool(isinstance(options, dict) and options.get("include_usage")),
        extra={k: body[k] for k in PASSED_THROUGH if k in body and body[k] is not None})


def _number(body: dict[str, Any], name: str) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise GatewayError(400, f"'{name}' must be a number.", param=name)
    return float(value)


def new_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def message_of(result: ChatResult) -> dict[str, Any]:
    """The assistant message of a reply, as the client appends it to its conversation."""
    message: dict[str, Any] = {"role": "assistant", "content": result.text or None}
    if result.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function",
             "function": {"name": c.name, "arguments": c.raw_arguments}}
            for c in result.tool_calls]
    elif message["content"] is None:
        message["content"] = ""
    return message


def finish_of(result: ChatResult) -> str:
    return result.finish_reason or ("tool_calls" if result.tool_calls else "stop")


def usage_of(result: ChatResult) -> dict[str, int]:
    u = result.usage
    return {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
            "total_tokens": u.total}


def completion(result: ChatResult, model: str, reply_id: str | None = None) -> dict[str, Any]:
    """A chat.completion object (`model`: the name the client asked for)."""
    return {"id": reply_id or new_id(), "object": "chat.completion", "created": int(time.time()),
            "model": model, "system_fingerprint": None,
            "choices": [{"index": 0, "message": message_of(result), "logprobs": None,
                         "finish_reason": finish_of(result)}],
            "usage": usage_of(result)}


def sse(data: dict[str, Any] | str) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False,
                                                         separators=(",", ":"))
    return f"data: {text}\n\n".encode()


class Chunks:
    """The chat.completion.chunk events of one streamed reply, in the order a client reads
    them: the role, the content deltas as they come, then tool calls, the finish, usage."""

    def __init__(self, model: str, reply_id: str | None = None) -> None:
        self.model, self.id, self.created = model, reply_id or new_id(), int(time.time())

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse({"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                    "model": self.model, "system_fingerprint": None,
                    "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                 "finish_reason": finish}]})

    def opening(self) -> bytes:
        return self._chunk({"role": "assistant", "content": ""})

    def content(self, delta: str) -> bytes:
        return self._chunk({"content": delta})

    def ending(self, result: ChatResult, *, usage: bool) -> Iterator[bytes]:
        if result.tool_calls:
            yield self._chunk({"tool_calls": [
                {"index": i, "id": c.id, "type": "function",
                 "function": {"name": c.name, "arguments": c.raw_arguments}}
                for i, c in enumerate(result.tool_calls)]})
        yield self._chunk({}, finish_of(result))
        if usage:
            yield sse({"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                       "model": self.model, "choices": [], "usage": usage_of(result)})
        yield sse("[DONE]")

    def error(self, error: GatewayError) -> Iterator[bytes]:
        """An error after the stream began: the OpenAI SDKs raise an event with an error."""
        yield sse(error.body())
        yield sse("[DONE]")
