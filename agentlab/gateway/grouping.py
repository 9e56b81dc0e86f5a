"""Which run a chat request belongs to, read from the request alone (pure).

An agent's loop sends its whole conversation every time: the request after a reply holds the
messages before plus that reply plus what the agent did with it (tool results, a new question).
So each reply leaves a `turn key` (a hash of the conversation up to and including the reply,
normalised), and a later request belongs to the run whose turn key equals its messages up to
one of its assistant messages — the longest such prefix. Two agents that start from the same
prompt get different replies, or at least different tool call ids, so they stay apart; a
request with no assistant message opens a run of its own unless a session or trace says
otherwise (`traceparent`).

Normalised: what a client may re-send differently without meaning anything else — null and
empty fields, content as a list of text parts, a tool call's arguments re-serialised — compares
equal.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")


def trace_id(traceparent: str | None) -> str | None:
    """The trace id of a W3C `traceparent` header (None when absent, malformed or all zero)."""
    m = TRACEPARENT.match((traceparent or "").strip().lower())
    return m[1] if m and m[1] != "0" * 32 else None


def text_of(content: Any) -> str:
    """A message's content as text: a string, or the text parts of a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") if isinstance(p, dict) and p.get("type") in ("text", None)
                 else _canonical(p) for p in content]
        return "".join(parts)
    return _canonical(content)


def _arguments(raw: Any) -> str:
    if isinstance(raw, str):
        try:
            return _canonical(json.loads(raw))
        except ValueError:
            return raw
    return _canonical(raw)


def normal(message: dict[str, Any]) -> dict[str, Any]:
    """What a message says, without how it was written down."""
    out: dict[str, Any] = {"role": message.get("role"), "content": text_of(message.get("content"))}
    calls = message.get("tool_calls") or []
    if isinstance(calls, list) and calls:
        out["tool_calls"] = [
            [c.get("id") or "", (c.get("function") or {}).get("name") or "",
             _arguments((c.get("function") or {}).get("arguments"))]
            for c in calls if isinstance(c, dict)]
    if message.get("tool_call_id"):
        out["tool_call_id"] = message["tool_call_id"]
    if message.get("role") in ("function", "tool") and message.get("name"):
        out["name"] = message["name"]
    return out


def normal_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [normal(m) for m in messages]


def normal_request(request: dict[str, Any]) -> dict[str, Any]:
    """A recorded or new request, normalised for replay's matching (agentlab.llm.replay)."""
    return {**request, "messages": normal_messages(request.get("messages") or [])}


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                      default=str)


def _chained(key: str, message: dict[str, Any]) -> str:
    return hashlib.sha256((key + _canonical(message)).encode()).hexdigest()[:32]


def key_of(messages: Sequence[dict[str, Any]]) -> str:
    """The turn key of a normalised conversation: a hash chained message by message, so the
    keys of all its prefixes cost one pass (an agent's conversation grows every call)."""
    key = ""
    for message in messages:
        key = _chained(key, message)
    return key


def turn_key(messages: Sequence[dict[str, Any]], reply: dict[str, Any]) -> str:
    """The key a reply leaves: the request's conversation plus the reply."""
    return _chained(key_of(normal_messages(messages)), normal(reply))


def prefix_keys(messages: Sequence[dict[str, Any]]) -> list[tuple[int, str]]:
    """(end, key) of each prefix that ends with an assistant message, the longest first: the
    keys a request may continue."""
    found, key = [], ""
    for i, message in enumerate(normal_messages(messages)):
        key = _chained(key, message)
        if message["role"] == "assistant":
            found.append((i + 1, key))
    return found[::-1]


def tool_results(messages: Sequence[dict[str, Any]], start: int) -> list[tuple[str, str]]:
    """(tool_call_id, text) of the tool results at or after message `start`: what the agent
    did with the reply the request continues."""
    return [(m["tool_call_id"], text_of(m.get("content"))) for m in messages[start:]
            if m.get("role") in ("tool", "function") and m.get("tool_call_id")]


def question(messages: Sequence[dict[str, Any]]) -> str:
    """The run's question: the last user message of its first request."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return text_of(message.get("content"))
    return text_of(messages[-1].get("content")) if messages else ""
