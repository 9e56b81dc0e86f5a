"""Where each framework puts a run's question and answer, and which framework wrote a
trace (pure).

A root span's `input.value` is often the framework's own state: `{"messages": [...]}` in
LangGraph (LangChain's serialised messages, or (role, text) pairs), `{"task": ...}` in
smolagents, a query string or `{"query_str": ...}` in LlamaIndex; the OpenAI Agents SDK's
root carries none at all. The question is the last user message (or the task, the query) and
the answer the last assistant message that calls no tool, found there or else in the run's
model calls.
"""

from __future__ import annotations

import re
from typing import Any

from traces.otel import genai
from traces.otel.decode import Span
from traces.otel.values import parsed, text
from traces.schema import Step

# Instrumentation scopes -> the framework they instrument; a framework's before the SDK's
# (a LangChain app also instrumenting the openai SDK is a LangChain app).
_SCOPES = (("openinference.instrumentation.langchain", "LangChain"),
           ("openinference.instrumentation.smolagents", "smolagents"),
           ("openinference.instrumentation.openai_agents", "OpenAI Agents SDK"),
           ("openinference.instrumentation.llama_index", "LlamaIndex"),
           ("openinference.instrumentation.crewai", "CrewAI"),
           ("openinference.instrumentation.pydantic_ai", "PydanticAI"),
           ("pydantic-ai", "PydanticAI"), ("openinference.instrumentation.dspy", "DSPy"),
           ("openinference.instrumentation.autogen", "AutoGen"),
           ("openinference.instrumentation.agno", "Agno"),
           ("openinference.instrumentation.openai", "OpenAI SDK"),
           ("opentelemetry.instrumentation.openai_v2", "OpenAI SDK"),
           ("opentelemetry.instrumentation.openai", "OpenAI SDK"),
           ("opentelemetry.util.genai.handler", "OpenTelemetry GenAI"),
           ("openinference.instrumentation.anthropic", "Anthropic SDK"),
           ("openinference.instrumentation.litellm", "LiteLLM"))
_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool",
          "HumanMessage": "user", "AIMessage": "assistant", "AIMessageChunk": "assistant",
          "SystemMessage": "system", "ToolMessage": "tool", "model": "assistant",
          "developer": "system", "user": "user", "assistant": "assistant"}
_QUESTION_KEYS = ("task", "query", "question", "query_str", "user_msg", "input", "prompt",
                  "user_input", "message", "content")
# A Python object's repr ("StopEvent(result=…)", "<Context object at 0x…>"): a framework's
# state printed, never the question or the answer itself.
_REPR = re.compile(r"[A-Z]\w*\((\w+=|\)).*|<[\w.]+ object at 0x[0-9a-fA-F]+>.*", re.S)
_CALL_WRAPPER = {"args", "kwargs", "sanitize_inputs_outputs"}
_ANSWER_KEYS = ("final_output", "output", "answer", "final_answer", "response", "result",
                "content", "text")


def framework(spans: list[Span]) -> dict[str, str]:
    """The framework, its version where the trace says it, the instrumentation (scope name
    and version) and the OpenTelemetry SDK that wrote the trace."""
    scopes = {s.scope: s.scope_version for s in spans if s.scope}
    return framework_of(scopes, spans[0].resource if spans else {},
                        any(is_langgraph(s) for s in spans))


def is_langgraph(span: Span) -> bool:
    """Does this span say LangGraph made it (its runs go through LangChain's callbacks)?"""
    return '"ls_integration": "langgraph"' in str(span.attributes.get("metadata") or "")


def framework_of(scopes: dict[str, str], resource: dict[str, Any],
                 langgraph: bool) -> dict[str, str]:
    """framework(): from the trace's scopes (name -> version), its first span's resource,
    and whether a span said LangGraph."""
    found = next(((scope, name) for scope, name in _SCOPES if scope in scopes), None)
    out = {"framework": found[1] if found else "", "framework_version": "",
           "instrumentation": " ".join(filter(None, (found[0], scopes[found[0]])))
           if found else ""}
    if found and found[1] == "LangChain" and langgraph:
        out["framework"] = "LangGraph"
    if found:
        key = out["framework"].split()[0].lower()
        out["framework_version"] = str(resource.get(f"{key}.version") or "")
    sdk = [resource.get(f"telemetry.sdk.{k}") for k in ("name", "language", "version")]
    out["sdk"] = " ".join(str(v) for v in sdk if v)
    return out


def question(root: Span | None, steps: list[Step]) -> str:
    """The run's question: the root's input read as its framework wrote it, else the last
    user message of the first model call, else the root's input as it is."""
    a = root.attributes if root else {}
    raw = a.get("input.value")
    if root is not None and (request := genai.request(root)):
        found = _last(request["messages"], "user")
        if found:
            return found
    found = _question(raw, a.get("input.mime_type"))
    if found:
        return found
    first_call = next((s for s in steps if s.kind == "llm"), None)
    if first_call is not None and isinstance(first_call.input, dict):
        found = _last(first_call.input.get("messages"), "user")
    return found or text(raw)


def answer(root: Span | None, steps: list[Step]) -> str:
    """The run's answer: the root's output read as its framework wrote it, else the text of
    the last model call that called no tool, else the root's output as it is."""
    a = root.attributes if root else {}
    raw = a.get("output.value")
    if root is not None:
        message, _reason = genai.reply(root)
        if message and (found := content_text(message.get("content"))):
            return found
    found = _answer(raw, a.get("output.mime_type"))
    if found:
        return found
    for step in reversed(steps):
        if answers(step):
            return str(step.output["text"])
    return text(raw)


def answers(step: Step) -> bool:
    """Is this step a model call that answered (its text, no tool called)?"""
    out = step.output if isinstance(step.output, dict) else {}
    return (step.kind == "llm" and step.status == "ok" and not out.get("tool_calls")
            and bool(out.get("text")))


def _question(raw: Any, mime: Any) -> str:
    value = _value(raw, mime)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return _last(value, "user")
    if isinstance(value, dict):
        for key in ("messages", "input", "chat_history"):
            if isinstance(value.get(key), list) and (found := _last(value[key], "user")):
                return found
        for key in _QUESTION_KEYS:
            if isinstance(value.get(key), str) and value[key].strip():
                return value[key]
        for inner in value.values():  # one level down: {"kwargs": {...}}, {"inputs": {...}}
            if isinstance(inner, dict) and (found := _question(inner, None)):
                return found
    return ""


def _answer(raw: Any, mime: Any) -> str:
    value = _value(raw, mime)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return _last(value, "assistant")
    if isinstance(value, dict):
        if isinstance(value.get("messages"), list) and (
                found := _last(value["messages"], "assistant")):
            return found
        for key in _ANSWER_KEYS:
            if isinstance(value.get(key), str) and value[key].strip():
                return value[key]
            if isinstance(value.get(key), dict) and (found := _answer(value[key], None)):
                return found
    return ""


def _value(raw: Any, mime: Any) -> Any:
    if isinstance(raw, str) and _REPR.fullmatch(raw.strip()):
        return None
    if isinstance(raw, str) and mime == "text/plain":
        return raw
    return parsed(raw)


def tool_arguments(value: Any) -> Any:
    """A tool's arguments without the framework's call wrapper (smolagents' and LlamaIndex's
    `{"args": [], "kwargs": {...}}`), or None when there is none."""
    if (isinstance(value, dict) and set(value) <= _CALL_WRAPPER
            and isinstance(value.get("kwargs"), dict) and not value.get("args")):
        return value["kwargs"]
    return None


def restore_arguments(steps: list[Step],
                      asked: list[tuple[str, dict[str, Any]]] | None = None) -> None:
    """A tool step whose input is one bare value (LangChain's span of a one-argument tool)
    gets the arguments of the model's call it answered: an earlier call of its name whose
    one argument is that value. The bare value stays on meta as `input.value`. `asked`: the
    calls asked earlier and not answered yet (a big file's earlier chunks), added to."""
    asked = [] if asked is None else asked
    for step in steps:
        if step.kind == "llm" and isinstance(step.output, dict):
            asked += [(str(c.get("name")), c["arguments"]) for c in
                      step.output.get("tool_calls") or []
                      if isinstance(c, dict) and isinstance(c.get("arguments"), dict)]
        elif step.kind == "tool" and isinstance(step.input, str | int | float):
            match = next(((name, args) for name, args in asked if name == step.name
                          and len(args) == 1 and str(next(iter(args.values()))) == str(
                              step.input)), None)
            if match is not None:
                asked.remove(match)
                step.meta["input.value"] = text(step.input)
                step.input = match[1]


def tool_result(value: Any) -> str | None:
    """A tool's result inside the framework's own object (LangChain's ToolMessage,
    LlamaIndex's ToolOutput), or None when it is not one."""
    if not isinstance(value, dict):
        return None
    data = value.get("data") if isinstance(value.get("data"), dict) else value.get("kwargs")
    message = value.get("type") == "tool" or (isinstance(value.get("id"), list)
                                              and value["id"][-1:] == ["ToolMessage"])
    if message and isinstance(data, dict) and "content" in data:
        return content_text(data["content"]) or text(data["content"])
    if "raw_output" in value and "tool_name" in value:
        return text(value["raw_output"])
    return None


def _last(messages: Any, role: str) -> str:
    """The text of the last message of `role` (an assistant's: one that calls no tool)."""
    if not isinstance(messages, list):
        return ""
    for m in reversed(messages):
        who, said, calls = _message(m)
        if who == role and said and not (role == "assistant" and calls):
            return said
    return ""


def _message(m: Any) -> tuple[str, str, bool]:
    """(role, text, calls a tool) of a message in any of the shapes frameworks write."""
    if isinstance(m, list | tuple) and len(m) == 2 and isinstance(m[0], str):
        return _ROLES.get(m[0], m[0]), content_text(m[1]), False
    if not isinstance(m, dict):
        return "", "", False
    if isinstance(m.get("data"), dict) and "type" in m:  # LangChain's message_to_dict
        m = {**m["data"], "type": m["type"]}
    if "kwargs" in m and isinstance(m["kwargs"], dict):  # LangChain's serialised message
        kw = m["kwargs"]
        kind = m.get("id")[-1] if isinstance(m.get("id"), list) and m["id"] else ""
        role = _ROLES.get(str(kw.get("type") or ""), _ROLES.get(str(kind), ""))
        return role, content_text(kw.get("content")), bool(kw.get("tool_calls"))
    if "parts" in m:  # GenAI
        chats = genai.from_parts(m)
        chat = chats[0] if chats else {}
        return (_ROLES.get(str(m.get("role")), str(m.get("role") or "")),
                content_text(chat.get("content")), bool(chat.get("tool_calls")))
    role = str(m.get("role") or m.get("type") or "")
    content = m.get("content", m.get("blocks", m.get("text")))
    calls = bool(m.get("tool_calls")) or m.get("type") == "function_call"
    return _ROLES.get(role, role), content_text(content), calls


def content_text(content: Any) -> str:
    """Message content as text: a string, or the text of its parts (OpenAI's, LangChain's,
    LlamaIndex's blocks, the Responses API's input_text/output_text)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text") or p.get("content") or "") for p in content
                       if isinstance(p, dict) and p.get("type", p.get("block_type", "text"))
                       in ("text", "input_text", "output_text"))
    return ""
