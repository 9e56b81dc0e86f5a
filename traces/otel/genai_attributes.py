"""The OpenTelemetry GenAI attributes of a run's spans (pure), written beside the
OpenInference ones so a peer that reads only the GenAI conventions reads our runs too: the
operation (`chat`, `execute_tool`, `invoke_agent`), models, usage, finish reasons, and the
messages as the current JSON attributes (`gen_ai.input.messages` / `gen_ai.output.messages`,
messages of typed `parts`). The table is docs/INTEROP.md's."""

from __future__ import annotations

import json
from typing import Any

from traces.schema import Step

_PARAMS = {"temperature": "gen_ai.request.temperature", "max_tokens": "gen_ai.request.max_tokens",
           "top_p": "gen_ai.request.top_p", "seed": "gen_ai.request.seed"}


def agent(name: str, question: Any = None, answer: Any = None) -> dict[str, Any]:
    """A run or a sub-run: an agent's invocation, with its question and answer as messages."""
    attrs: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent"}
    if name:
        attrs["gen_ai.agent.name"] = name
    if isinstance(question, str) and question:
        attrs["gen_ai.input.messages"] = _js([{"role": "user", "parts": [_text(question)]}])
    if isinstance(answer, str) and answer:
        attrs["gen_ai.output.messages"] = _js([{"role": "assistant", "parts": [_text(answer)],
                                                "finish_reason": "stop"}])
    return attrs


def llm(step: Step, model: str | None, provider: str | None) -> dict[str, Any]:
    """A model call: `chat`, its request and reply (none for a failed call)."""
    request = step.input if isinstance(step.input, dict) else {}
    failed = step.status == "error"
    reply = step.output if isinstance(step.output, dict) and not failed else {}
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": provider,
        "gen_ai.request.model": model, "gen_ai.response.model": reply.get("model") or None,
        "gen_ai.usage.input_tokens": step.tokens_in,
        "gen_ai.usage.output_tokens": step.tokens_out,
        **{key: request[name] for name, key in _PARAMS.items()
           if isinstance(request.get(name), int | float) and not isinstance(request[name], bool)},
    }
    stop = request.get("stop")
    if stop:
        attrs["gen_ai.request.stop_sequences"] = [stop] if isinstance(stop, str) else \
            [str(s) for s in stop] if isinstance(stop, list) else None
    messages = [m for m in request.get("messages") or [] if isinstance(m, dict)]
    if messages:
        attrs["gen_ai.input.messages"] = _js([to_parts(m) for m in messages])
    tools = [t.get("function") for t in request.get("tools") or []
             if isinstance(t, dict) and isinstance(t.get("function"), dict)]
    if tools:
        attrs["gen_ai.tool.definitions"] = _js([{"type": "function", **t} for t in tools])
    if reply or (step.text and not failed):
        finish = reply.get("finish_reason") or "stop"
        attrs["gen_ai.response.finish_reasons"] = [str(finish)]
        out = to_parts({"role": "assistant", "content": reply.get("text", step.text),
                        "tool_calls": [{"id": c.get("id"), "function": {
                            "name": c.get("name"), "arguments": c.get("raw_arguments", "")}}
                            for c in reply.get("tool_calls") or [] if isinstance(c, dict)]})
        attrs["gen_ai.output.messages"] = _js([{**out, "finish_reason": str(finish)}])
    return attrs


def tool(step: Step, call_id: str | None, description: str | None) -> dict[str, Any]:
    """A tool's execution: its name, call id, arguments and result."""
    result = step.text or step.output
    return {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": step.name,
            "gen_ai.tool.type": "function", "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.description": description,
            "gen_ai.tool.call.arguments": None if step.input is None else _js(step.input),
            "gen_ai.tool.call.result": result if isinstance(result, str) or result is None
            else _js(result)}


def to_parts(message: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI chat message as a GenAI message: role and parts (text, tool_call,
    tool_call_response)."""
    role = str(message.get("role") or "")
    if role == "tool":
        return {"role": "tool", "parts": [{"type": "tool_call_response",
                                           "id": message.get("tool_call_id"),
                                           "response": message.get("content")}]}
    content = message.get("content")
    parts: list[dict[str, Any]] = []
    if isinstance(content, str) and content:
        parts.append(_text(content))
    elif isinstance(content, list):
        for p in content:
            if isinstance(p, dict) and p.get("type") == "text":
                parts.append(_text(str(p.get("text") or "")))
            elif isinstance(p, dict) and p.get("type") == "image_url":
                url = (p.get("image_url") or {}).get("url", "")
                parts.append({"type": "uri", "modality": "image", "uri": url})
            else:
                parts.append({"type": "generic", "value": p})
    for call in message.get("tool_calls") or []:
        function = (call.get("function") or {}) if isinstance(call, dict) else {}
        parts.append({"type": "tool_call", "id": call.get("id") if isinstance(call, dict)
                      else None, "name": function.get("name") or "",
                      "arguments": _arguments(function.get("arguments"))})
    out: dict[str, Any] = {"role": role, "parts": parts}
    if message.get("name"):
        out["name"] = message["name"]
    return out


def _arguments(raw: Any) -> Any:
    """Arguments as the object they encode (the conventions' shape), else as they are."""
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _text(content: str) -> dict[str, Any]:
    return {"type": "text", "content": content}


def _js(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
