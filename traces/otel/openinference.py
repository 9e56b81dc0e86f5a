"""An LLM span's request and reply in OpenInference terms (pure): the flattened
`llm.input_messages.N.message.*`, `llm.output_messages.N.message.*`, `llm.tools.N.*` and
`llm.invocation_parameters`, as OpenAI chat messages."""

from __future__ import annotations

from typing import Any

from traces.otel.values import parsed

READ = {"openinference.span.kind", "input.value", "input.mime_type", "output.value",
        "output.mime_type", "llm.model_name", "llm.token_count.prompt",
        "llm.token_count.completion", "llm.token_count.total", "llm.cost.total",
        "llm.invocation_parameters", "llm.finish_reason", "tool.name"}
READ_PREFIXES = ("llm.input_messages.", "llm.output_messages.", "llm.tools.")
# The keys an OpenAI chat message may have: a request whose messages have only these is the
# request as sent; anything else (LangChain's serialised objects, a framework's state) is not.
# smolagents' own roles, sent to the model as these
_ROLES = {"tool-call": "assistant", "tool-response": "user"}
CHAT_KEYS = {"role", "content", "name", "tool_calls", "tool_call_id", "function_call",
             "refusal", "audio"}


def indexed(a: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """`llm.input_messages.0.message.role` & co. -> [{"message.role": …}, …] by index."""
    items: dict[int, dict[str, Any]] = {}
    for key, value in a.items():
        if key.startswith(prefix):
            index, _, rest = key[len(prefix):].partition(".")
            if index.isdigit():
                items.setdefault(int(index), {})[rest] = value
    return [items[i] for i in sorted(items)]


def request(a: dict[str, Any]) -> dict[str, Any] | None:
    """The request rebuilt from the flattened attributes; None when there are no messages."""
    messages = indexed(a, "llm.input_messages.")
    if not messages:
        return None
    out: dict[str, Any] = {"messages": [message(m) for m in messages]}
    tools = indexed(a, "llm.tools.")
    if tools:
        out["tools"] = [parsed(t.get("tool.json_schema"), "application/json") for t in tools]
    params = parsed(a.get("llm.invocation_parameters"), "application/json")
    if isinstance(params, dict):
        out |= {k: v for k, v in params.items() if k not in out}
    return out


def reply(a: dict[str, Any]) -> dict[str, Any] | None:
    """The first output message (OpenAI chat shape), or None."""
    out = indexed(a, "llm.output_messages.")
    return message(out[0]) if out else None


def message(flat: dict[str, Any]) -> dict[str, Any]:
    role = flat.get("message.role", "")
    role = role if isinstance(role, str) else str(role)  # a hostile span may send any value
    m: dict[str, Any] = {"role": _ROLES.get(role, role),
                         "content": flat.get("message.content")}
    if m["content"] is None:  # multi-part content: message.contents.N.message_content.text
        parts = indexed(flat, "message.contents.")
        m["content"] = "".join(str(p.get("message_content.text") or "") for p in parts)
    for key in ("name", "tool_call_id"):
        if flat.get(f"message.{key}"):
            m[key] = flat[f"message.{key}"]
    calls = indexed(flat, "message.tool_calls.")
    if calls:
        m["tool_calls"] = [{"id": c.get("tool_call.id", ""), "type": "function", "function": {
            "name": c.get("tool_call.function.name", ""),
            "arguments": c.get("tool_call.function.arguments", "")}} for c in calls]
    return m


def is_chat_request(value: Any) -> bool:
    """Is `value` an OpenAI chat request (its messages plain chat messages), not a
    framework's own serialisation that happens to have "messages"?"""
    if not isinstance(value, dict) or not isinstance(messages := value.get("messages"), list):
        return False
    for m in messages:  # a loop, not all(…): called for every LLM span a receiver takes
        if not (isinstance(m, dict) and isinstance(m.get("role"), str)
                and CHAT_KEYS.issuperset(m)):
            return False
    return True
