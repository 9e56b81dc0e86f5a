"""The LLM playground's request: the user's edited messages and parameters, checked, then one
call to a model profile. Every problem is a sentence for the page; nothing is recorded."""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async

from agentlab.llm.errors import LLMError
from agentlab.llm.types import ChatResult, ProfileConfig
from agentlab.profiles import model_for, to_config
from traces.redact import redact_urls

log = logging.getLogger(__name__)

PARAM_KEYS = ("tools", "tool_choice", "response_format", "stop", "temperature", "max_tokens")
ROLES = ("system", "developer", "user", "assistant", "tool")
TOOL_CHOICES = ("auto", "none", "required")
MAX_REQUEST_CHARS = 1_000_000  # messages and parameters together, as typed
MAX_MESSAGES = 500
MAX_STOP = 16
MAX_TOKENS = 1_000_000
CALL_TIMEOUT_S = 180.0  # the whole call: retries and fallback profiles included


@dataclass(frozen=True)
class Request:
    messages: list[dict[str, Any]]
    params: dict[str, Any]


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text} is out of range")
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _load(label: str, raw: str, kind: type, errors: list[str]) -> Any:
    try:
        value = json.loads(raw, parse_float=_finite, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        errors.append(f"{label}: not valid JSON ({exc})")
        return None
    except ValueError as exc:
        errors.append(f"{label}: {exc}")
        return None
    except RecursionError:
        errors.append(f"{label}: nested too deeply")
        return None
    if not isinstance(value, kind):
        errors.append(f"{label}: must be a JSON {'list' if kind is list else 'object'}")
        return None
    return value


def _message_problem(i: int, m: Any) -> str | None:
    where = f"messages: message {i}"
    if not isinstance(m, dict) or "role" not in m:
        return 'messages: every message must be an object with a "role"'
    if m["role"] not in ROLES:
        return f"{where}: the role must be one of {', '.join(ROLES)}"
    content = m.get("content")
    if not (content is None or isinstance(content, str) or (
            isinstance(content, list) and all(isinstance(p, dict) for p in content))):
        return f"{where}: the content must be text, null or a list of content parts (objects)"
    for key in ("name", "tool_call_id"):
        if key in m and not isinstance(m[key], str):
            return f'{where}: "{key}" must be text'
    calls = m.get("tool_calls")
    if calls is not None and not (isinstance(calls, list) and all(
            isinstance(c, dict) and isinstance(c.get("function"), dict)
            and isinstance(c["function"].get("name"), str) for c in calls)):
        return (f'{where}: "tool_calls" must be a list like [{{"id": "call_0", "type": '
                '"function", "function": {"name": "calculator", "arguments": "{}"}}]')
    return None


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


# Each parameter: (is the value right, what it must be). None is always allowed (the default).
_PARAM_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "tools": (lambda v: isinstance(v, list) and all(isinstance(t, dict) for t in v),
              "a list of tool objects"),
    "tool_choice": (lambda v: v in TOOL_CHOICES or isinstance(v, dict),
                    f"one of {', '.join(TOOL_CHOICES)} or an object"),
    "response_format": (lambda v: isinstance(v, dict), 'an object, e.g. {"type": "json_object"}'),
    "stop": (lambda v: isinstance(v, str) or (isinstance(v, list) and len(v) <= MAX_STOP and all(
        isinstance(s, str) for s in v)), f"text or a list of at most {MAX_STOP} texts"),
    "temperature": (lambda v: _is_number(v) and 0 <= v <= 2, "a number from 0 to 2"),
    "max_tokens": (lambda v: isinstance(v, int) and not isinstance(v, bool)
                   and 1 <= v <= MAX_TOKENS, f"a whole number from 1 to {MAX_TOKENS:,}"),
}


def parse_request(messages: str, params: str) -> tuple[Request | None, list[str]]:
    """The request as the user edited it, or every problem with it."""
    if len(messages) + len(params) > MAX_REQUEST_CHARS:
        return None, [f"the request is {len(messages) + len(params):,} characters, over the "
                      f"limit of {MAX_REQUEST_CHARS:,}"]
    errors: list[str] = []
    msgs = _load("messages", messages, list, errors)
    values = _load("parameters", params or "{}", dict, errors)
    if msgs is not None:
        if not msgs:
            errors.append("messages: give at least one message")
        elif len(msgs) > MAX_MESSAGES:
            errors.append(f"messages: {len(msgs):,} messages, over the limit of {MAX_MESSAGES}")
        elif problem := next((p for i, m in enumerate(msgs, 1)
                              if (p := _message_problem(i, m))), None):
            errors.append(problem)
    if values is not None:
        if unknown := sorted(set(values) - set(PARAM_KEYS)):
            errors.append(f"parameters: unknown key(s) {', '.join(unknown)}; "
                          f"allowed: {', '.join(PARAM_KEYS)}")
        for key, (ok, what) in _PARAM_RULES.items():
            if values.get(key) is not None and not ok(values[key]):
                errors.append(f"parameters: {key} must be {what}")
    if errors:
        return None, errors
    if isinstance(values.get("stop"), str):
        values["stop"] = [values["stop"]]
    return Request(msgs, values), []


def reply_text(output: Any) -> str:
    """What a recorded llm step answered, as text: its reply's text, else its tool calls as
    `name(arguments)` lines (the expected reply a saved playground case starts with)."""
    output = output if isinstance(output, dict) else {}
    text = output.get("text")
    if isinstance(text, str) and text.strip():
        return text.strip()
    calls = output.get("tool_calls")
    lines = []
    for call in calls if isinstance(calls, list) else []:
        if isinstance(call, dict):
            raw = call.get("raw_arguments")
            args = raw if isinstance(raw, str) else json.dumps(call.get("arguments") or {},
                                                              ensure_ascii=False)
            lines.append(f"{call.get('name', '?')}({args})")
    return "\n".join(lines)


async def send(values: dict[str, str], profiles: list[Any]) -> tuple[ChatResult | None,
                                                                     list[str]]:
    """The playground's POST (messages, params and a profile's name, as typed) sent to the
    named one of `profiles` (ModelProfile rows): the reply, or every problem in words."""
    parsed, errors = parse_request(values["messages"], values["params"])
    profile = next((p for p in profiles if p.name == values["profile"]), None)
    if profile is None:
        errors.append(f"model profile: choose one of {', '.join(p.name for p in profiles)}")
    if errors or parsed is None:
        return None, errors
    result, problem = await call_model(await sync_to_async(to_config)(profile), parsed)
    return result, [problem] if problem else []


async def call_model(config: ProfileConfig, request: Request) -> tuple[ChatResult | None, str]:
    """One call to the profile: the reply, or what went wrong in words (credentials blanked)."""
    try:
        async with asyncio.timeout(CALL_TIMEOUT_S):
            return await model_for(config).chat(request.messages, **request.params), ""
    except LLMError as exc:
        return None, f"the model call failed: {exc}"  # LLMError keeps URLs' secrets out
    except TimeoutError:
        return None, f"the model call failed: no reply within {CALL_TIMEOUT_S:g} s"
    except Exception as exc:  # an endpoint may answer anything; the page says so, never a 500
        log.warning("playground: unreadable reply from profile %r", config.name, exc_info=True)
        return None, redact_urls(
            f"the endpoint's reply is not a chat completion this client can read "
            f"({type(exc).__name__}: {exc})")
