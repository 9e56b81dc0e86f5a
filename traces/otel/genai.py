"""A span in the OpenTelemetry GenAI semantic conventions, read (pure).

The operation (`gen_ai.operation.name`) gives the step's kind; an inference span's messages
come from the current JSON attributes (`gen_ai.system_instructions`, `gen_ai.input.messages`,
`gen_ai.output.messages`: messages of typed `parts`), or from the span events of the
conventions before 1.37 (`gen_ai.system.message`, `gen_ai.user.message`,
`gen_ai.assistant.message`, `gen_ai.tool.message`, `gen_ai.choice`; the older
`gen_ai.content.prompt` / `gen_ai.content.completion`), or from the indexed
`gen_ai.prompt.N.*` / `gen_ai.completion.N.*` some instrumentations write; all become OpenAI
chat messages, as an Agent Lab llm step holds them.
"""

from __future__ import annotations

import json
from typing import Any

from traces.otel.decode import Span
from traces.otel.openinference import indexed
from traces.otel.values import first, parsed, text

OPERATIONS = {"chat": "llm", "text_completion": "llm", "generate_content": "llm",
              "embeddings": "tool", "retrieval": "tool", "execute_tool": "tool",
              "invoke_agent": "message", "invoke_workflow": "message",
              "create_agent": "thought"}
# Traceloop's (OpenLLMetry's) span kinds, for the spans that carry no operation name.
_TRACELOOP = {"workflow": "message", "agent": "message", "tool": "tool", "task": "thought"}
CONTAINERS = {"invoke_agent", "invoke_workflow", "workflow", "agent"}
MESSAGE_EVENTS = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                  "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}
REPLY_EVENTS = {"gen_ai.choice", "gen_ai.content.completion"}
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
EVENTS = {*MESSAGE_EVENTS, *REPLY_EVENTS, "gen_ai.content.prompt", DETAILS_EVENT}
_PARAMS = {"gen_ai.request.temperature": "temperature", "gen_ai.request.max_tokens": "max_tokens",
           "gen_ai.request.top_p": "top_p", "gen_ai.request.stop_sequences": "stop",
           "gen_ai.request.seed": "seed", "gen_ai.request.frequency_penalty": "frequency_penalty",
           "gen_ai.request.presence_penalty": "presence_penalty"}
READ = {"gen_ai.operation.name", "gen_ai.request.model", "gen_ai.response.model",
        "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.usage.prompt_tokens",
        "gen_ai.usage.completion_tokens", "gen_ai.response.finish_reasons",
        "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
        "gen_ai.tool.definitions", "gen_ai.tool.name", "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result", "gen_ai.agent.name", "traceloop.span.kind",
        "llm.request.type", *_PARAMS}
READ_PREFIXES = ("gen_ai.prompt.", "gen_ai.completion.")


def kind(a: dict[str, Any]) -> str | None:
    """The step kind the span's operation names, or None when it names none."""
    operation = str(a.get("gen_ai.operation.name") or "")
    if operation in OPERATIONS:
        return OPERATIONS[operation]
    if a.get("llm.request.type") in ("chat", "completion"):
        return "llm"
    if operation or a.get("gen_ai.request.model") or a.get("gen_ai.response.model"):
        return "llm"  # an inference under a name of its own
    return _TRACELOOP.get(str(a.get("traceloop.span.kind") or ""))


def is_container(a: dict[str, Any]) -> bool:
    return (a.get("gen_ai.operation.name") in CONTAINERS
            or a.get("traceloop.span.kind") in CONTAINERS)


def _attributes(span: Span) -> dict[str, Any]:
    """The span's attributes, with those of an inference-details event (1.37's event that
    carries the message attributes) where the span has none of its own."""
    a = span.attributes
    for name, _when, attrs in span.events:
        if name == DETAILS_EVENT:
            a = {**attrs, **a}
    return a


def request(span: Span) -> dict[str, Any] | None:
    """The request as OpenAI chat messages (+ tools and parameters); None when the span
    carries none of these."""
    a = _attributes(span)
    messages = [{"role": "system", "content": _parts_text(_list(a.get(
        "gen_ai.system_instructions")))}] if a.get("gen_ai.system_instructions") else []
    for m in _list(a.get("gen_ai.input.messages")):
        messages += from_parts(m)
    if not a.get("gen_ai.input.messages"):
        messages += _event_messages(span) or _indexed_messages(a, "gen_ai.prompt.")
    out: dict[str, Any] = {"messages": messages}
    tools = [_tool(t) for t in _list(a.get("gen_ai.tool.definitions")) if isinstance(t, dict)]
    if tools:
        out["tools"] = tools
    out |= {name: a[key] for key, name in _PARAMS.items() if key in a}
    return out if len(out) > 1 or messages else None


def reply(span: Span) -> tuple[dict[str, Any] | None, str | None]:
    """(The reply as an OpenAI chat message or None, its finish reason)."""
    a = _attributes(span)
    reasons = a.get("gen_ai.response.finish_reasons")
    reason = reasons[0] if isinstance(reasons, list) and reasons else reasons or None
    for m in _list(a.get("gen_ai.output.messages"))[:1]:
        if isinstance(m, dict):
            found = str(m.get("finish_reason") or reason or "") or None
            return next(iter(from_parts(m)), None), found
    for name, _when, attrs in span.events:
        if name == "gen_ai.choice":
            body = _body(attrs)
            message = body.get("message") if isinstance(body.get("message"), dict) else body
            return (_chat(message, "assistant"),
                    str(body.get("finish_reason") or reason or "") or None)
        if name == "gen_ai.content.completion":
            items = _list(attrs.get("gen_ai.completion"))
            if items and isinstance(items[0], dict):
                return _chat(items[0], "assistant"), reason
    flat = _indexed_messages(a, "gen_ai.completion.")
    if flat:
        return flat[0], str(a.get("gen_ai.completion.0.finish_reason") or reason or "") or None
    return None, reason


def model(a: dict[str, Any]) -> str:
    return str(first(a.get("gen_ai.response.model"), a.get("gen_ai.request.model")) or "")


def tokens(a: dict[str, Any]) -> tuple[Any, Any]:
    return (first(a.get("gen_ai.usage.input_tokens"), a.get("gen_ai.usage.prompt_tokens")),
            first(a.get("gen_ai.usage.output_tokens"), a.get("gen_ai.usage.completion_tokens")))


def from_parts(message: Any) -> list[dict[str, Any]]:
    """One GenAI message (`{"role", "parts": [...]}`) as OpenAI chat messages: tool call
    responses become one tool message each."""
    if not isinstance(message, dict):
        return []
    if "parts" not in message:  # already a chat message (some writers keep that shape)
        return [_chat(message, str(message.get("role") or ""))]
    role = str(message.get("role") or "")
    parts = [p for p in _list(message.get("parts")) if isinstance(p, dict)]
    out: list[dict[str, Any]] = [{"role": "tool", "tool_call_id": str(p.get("id") or ""),
                                  "content": text(p.get("response"))}
                                 for p in parts if p.get("type") == "tool_call_response"]
    rest = [p for p in parts if p.get("type") != "tool_call_response"]
    if rest or not out:
        chat: dict[str, Any] = {"role": role, "content": _content(rest)}
        calls = [{"id": str(p.get("id") or ""), "type": "function", "function": {
            "name": str(p.get("name") or ""), "arguments": _arguments(p.get("arguments"))}}
            for p in rest if p.get("type") == "tool_call"]
        if calls:
            chat["tool_calls"] = calls
        reasoning = "".join(text(p.get("content")) for p in rest if p.get("type") == "reasoning")
        if reasoning:
            chat["reasoning"] = reasoning
        if message.get("name"):
            chat["name"] = str(message["name"])
        out.insert(0, chat)
    return out


def _content(parts: list[dict[str, Any]]) -> Any:
    """Text parts as one string; with other parts (images, files), OpenAI content parts."""
    shown = [p for p in parts if p.get("type") not in ("tool_call", "reasoning")]
    if all(p.get("type") == "text" for p in shown):
        return "".join(text(p.get("content")) for p in shown) if shown else None
    out = []
    for p in shown:
        if p.get("type") == "text":
            out.append({"type": "text", "text": text(p.get("content"))})
        elif p.get("type") == "uri" and p.get("modality") == "image":
            out.append({"type": "image_url", "image_url": {"url": str(p.get("uri") or "")}})
        else:
            out.append(p)
    return out


def _parts_text(parts: list[Any]) -> str:
    return "".join(text(p.get("content")) if isinstance(p, dict) else text(p) for p in parts)


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _tool(definition: dict[str, Any]) -> dict[str, Any]:
    if isinstance(definition.get("function"), dict):
        return definition
    return {"type": "function", "function": {
        k: definition[k] for k in ("name", "description", "parameters") if k in definition}}


def _chat(body: dict[str, Any], role: str) -> dict[str, Any]:
    """An event body (or an OpenAI-shaped message) as an OpenAI chat message."""
    m: dict[str, Any] = {"role": str(body.get("role") or role), "content": body.get("content")}
    if role == "tool" or body.get("tool_call_id"):
        m["tool_call_id"] = str(body.get("tool_call_id") or body.get("id") or "")
    calls = [c for c in _list(body.get("tool_calls")) if isinstance(c, dict)]
    if calls:
        m["tool_calls"] = [{"id": str(c.get("id") or ""), "type": "function", "function": {
            "name": str((c.get("function") or {}).get("name") or c.get("name") or ""),
            "arguments": _arguments((c.get("function") or {}).get("arguments",
                                                                  c.get("arguments", "")))}}
            for c in calls]
    return m


def _body(attrs: dict[str, Any]) -> dict[str, Any]:
    """An event's body: its `gen_ai.event.content` JSON, else its own attributes."""
    content = parsed(attrs.get("gen_ai.event.content"), "application/json")
    if isinstance(content, dict):
        return content
    return {k: parsed(v) for k, v in attrs.items() if not k.startswith("gen_ai.")}


def _event_messages(span: Span) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name, _when, attrs in span.events:
        if name in MESSAGE_EVENTS:
            out.append(_chat(_body(attrs), MESSAGE_EVENTS[name]))
        elif name == "gen_ai.content.prompt":
            out += [_chat(m, str(m.get("role") or "")) for m in _list(attrs.get("gen_ai.prompt"))
                    if isinstance(m, dict)]
    return out


def _indexed_messages(a: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """`gen_ai.prompt.0.role`, `gen_ai.prompt.0.content`, `…tool_calls.0.name` & co."""
    out = []
    for flat in indexed(a, prefix):
        calls = [{"id": c.get("id"), "name": c.get("name"), "arguments": c.get("arguments")}
                 for c in indexed(flat, "tool_calls.")]
        out.append(_chat({"role": flat.get("role"), "content": flat.get("content"),
                          "tool_call_id": flat.get("tool_call_id"), "tool_calls": calls},
                         str(flat.get("role") or "")))
    return out


def _list(value: Any) -> list[Any]:
    value = parsed(value, "application/json")
    return value if isinstance(value, list) else []
