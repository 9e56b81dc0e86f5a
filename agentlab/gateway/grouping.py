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
equal. smolagents sends a reply's tool calls back written out as text (an assistant message
`Calling tools:\n[{'id': …, 'function': {…}}]`, a Python literal) and their results as a user
message `Observation:\n…`: read as the tool calls and tool results they stand for.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")
CALLING, OBSERVATION = "Calling tools:\n", "Observation:\n"  # smolagents' transcripts
TRANSCRIPT_CHARS = 100_000  # longer "Calling tools" text is not parsed: read as plain text


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


def written_calls(message: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The tool calls an assistant message writes out as smolagents does (None if it does
    not): `Calling tools:\n` and the calls as a Python literal, arguments as a dict."""
    if message.get("role") != "assistant" or message.get("tool_calls"):
        return None
    text = text_of(message.get("content"))
    if not text.startswith(CALLING) or len(text) > TRANSCRIPT_CHARS:
        return None
    try:
        calls = ast.literal_eval(text[len(CALLING):].strip())
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(calls, list) or not calls or not all(
            isinstance(c, dict) and isinstance(c.get("function"), dict) for c in calls):
        return None
    return calls


def normal(message: dict[str, Any]) -> dict[str, Any]:
    """What a message says, without how it was written down."""
    written = written_calls(message)
    out: dict[str, Any] = {"role": message.get("role"),
                           "content": "" if written else text_of(message.get("content"))}
    calls = written or message.get("tool_calls") or []
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
    """Normalised; a reply's text and its written-out calls (smolagents sends them as two
    assistant messages) become one message again, as the reply was."""
    out: list[dict[str, Any]] = []
    for message in messages:
        n = normal(message)
        if (out and not n["content"] and written_calls(message) is not None
                and out[-1]["role"] == "assistant" and "tool_calls" not in out[-1]):
            out[-1] = {**out[-1], "tool_calls": n["tool_calls"]}
        else:
            out.append(n)
    return out


def normal_request(request: dict[str, Any]) -> dict[str, Any]:
    """A recorded or new request, normalised for replay's matching (agentlab.llm.replay)."""
    return {**request, "messages": normal_messages(request.get("messages") or [])}


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                      default=str)


def _chained(key: str, message: dict[str, Any]) -> str:
    return hashlib.sha256((key + _canonical(message)).encode()).hexdigest()[:32]


def turn_key(messages: Sequence[dict[str, Any]], reply: dict[str, Any]) -> str:
    """The key a reply leaves: the request's conversation plus the reply."""
    return reply_key(conversation_keys(messages)[1], reply)


def reply_key(conversation: str, reply: dict[str, Any]) -> str:
    """`turn_key` from the key of the request's whole conversation (`conversation_keys`)."""
    return _chained(conversation, normal(reply))


def prefix_keys(messages: Sequence[dict[str, Any]]) -> list[tuple[int, str]]:
    """(end, key) of each prefix that ends with an assistant message, the longest first: the
    keys a request may continue."""
    return conversation_keys(messages)[0]


def conversation_keys(messages: Sequence[dict[str, Any]]) -> tuple[list[tuple[int, str]], str]:
    """`prefix_keys` and the key of the whole conversation, in one pass: a hash chained
    message by message, so the keys of all its prefixes cost one pass (an agent's
    conversation grows every call; normalising and hashing it costs ~10 µs a message, and a
    call needs both: agentlab.gateway.sessions)."""
    found, key = [], ""
    for i, message in enumerate(normal_messages(messages)):
        key = _chained(key, message)
        if message["role"] == "assistant":
            found.append((i + 1, key))
    return found[::-1], key


def tool_results(messages: Sequence[dict[str, Any]]) -> list[tuple[int, str, str]]:
    """(index, tool call id, text) of each tool result a conversation carries: `role: tool`
    (or `function`) messages, and smolagents' `Observation:` after its written-out calls (one
    text for all the calls of that reply)."""
    out = []
    for i, m in enumerate(messages):
        role = m.get("role")
        if role in ("tool", "function") and m.get("tool_call_id"):
            out.append((i, str(m["tool_call_id"]), text_of(m.get("content"))))
        elif role == "user" and i and (calls := written_calls(messages[i - 1])):
            text = text_of(m.get("content"))
            if text.startswith(OBSERVATION):
                out += [(i, str(c.get("id")), text[len(OBSERVATION):]) for c in calls
                        if c.get("id")]
    return out


def with_result(message: dict[str, Any], text: str) -> dict[str, Any]:
    """A tool result message saying `text` instead, written as it came."""
    return {**message, "content": OBSERVATION + text if message.get("role") == "user" else text}


def question(messages: Sequence[dict[str, Any]]) -> str:
    """The run's question: the last user message of its first request."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return text_of(message.get("content"))
    return text_of(messages[-1].get("content")) if messages else ""
