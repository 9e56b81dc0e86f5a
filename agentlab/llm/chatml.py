"""The embedded model's prompt and tool calls, as our own server-side chat handler builds them
(`agentlab.llm.embedded_server` runs it inside llama-cpp-python's server). Pure: no llama_cpp.

Why our own: llama-cpp-python's `chatml-function-calling` renders its Jinja template with HTML
autoescaping on (`"` reached the model as `&#34;`), drops `role: tool` messages, and spends
two to four unbounded completions on a tool turn. Here the prompt is plain ChatML built by
string concatenation (nothing is escaped), tool results are user turns that name their tool,
and a tool turn is one completion constrained by a JSON schema: {"tool": <one of the tool names
or "final_answer">, "arguments": <that tool's parameters>}, read back into OpenAI's shape."""

from __future__ import annotations

import contextlib
import json
import uuid
from typing import Any

IM_START, IM_END = "<|im_start|>", "<|im_end|>"
FINAL = "final_answer"  # the pseudo-tool a tool turn answers with
_ANSWER_ARGS = {"type": "object", "properties": {"answer": {"type": "string"}},
                "required": ["answer"]}

Piece = tuple[str, bool]  # (text, whether it is a special marker rather than content)


def tool_section(tools: list[dict[str, Any]]) -> str:
    """What the system message says about the tools and the reply format (short: a 135M model
    reads it on every turn)."""
    lines = ["You can use these tools:"]
    for tool in tools:
        fn = tool.get("function") or {}
        desc = " ".join(str(fn.get("description") or "").split())
        lines.append(f"- {fn.get('name')}: {desc} Arguments: {_arg_sketch(fn.get('parameters'))}")
    lines += ["", "Reply with one JSON object and nothing else.",
              'To call a tool: {"tool": "<tool name>", "arguments": {...}}',
              f'When you know the answer: {{"tool": "{FINAL}", "arguments": '
              '{"answer": "<the answer>"}}']
    return "\n".join(lines)


def _arg_sketch(schema: Any) -> str:
    props = (schema or {}).get("properties") or {} if isinstance(schema, dict) else {}
    return json.dumps({k: (v.get("type") if isinstance(v, dict) else None) or "any"
                       for k, v in props.items()})


def call_json(name: str, arguments: Any) -> str:
    """One tool call as the model writes it (and as earlier calls are shown to it again)."""
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):  # else shown as the text it was
            arguments = json.loads(arguments) if arguments.strip() else {}
    return json.dumps({"tool": name, "arguments": arguments}, ensure_ascii=False)


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, list):  # content parts
        return "".join(p if isinstance(p, str) else str(p.get("text") or "") for p in content)
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def render(messages: list[dict[str, Any]],
           tools: list[dict[str, Any]] | None = None) -> list[Piece]:
    """The prompt as pieces: markers (special tokens) apart from content, so a message that
    contains "<|im_end|>" is read as text, and nothing is escaped. `tools` (a tool turn) adds
    the tool section to the system message (or a system message of its own)."""
    pieces: list[Piece] = []
    names: dict[str, str] = {}  # tool_call_id -> tool name, to say whose result a result is
    section = tool_section(tools) if tools else ""
    if section and not any(m.get("role") == "system" for m in messages):
        messages = [{"role": "system", "content": ""}, *messages]
    for message in messages:
        role = str(message.get("role") or "user")
        content = _text(message.get("content"))
        if role == "system" and section:
            content = f"{content}\n\n{section}" if content else section
            section = ""  # once, in the first system message
        elif role == "assistant" and message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                fn = call.get("function") or {}
                names[str(call.get("id") or "")] = str(fn.get("name") or "tool")
                calls.append(call_json(str(fn.get("name") or ""), fn.get("arguments") or {}))
            content = "\n".join(([content] if content.strip() else []) + calls)
        elif role in ("tool", "function"):
            name = names.get(str(message.get("tool_call_id") or ""), message.get("name") or "")
            role, content = "user", f"Result of {name or 'the tool'}: {content}"
        elif role not in ("system", "user", "assistant"):
            role = "user"
        pieces += [(IM_START, True), (f"{role}\n{content}", False), (IM_END, True), ("\n", False)]
    pieces += [(IM_START, True), ("assistant\n", False)]
    return pieces


def prompt_text(pieces: list[Piece]) -> str:
    return "".join(text for text, _ in pieces)


def call_schema(tools: list[dict[str, Any]], forced: str | None = None) -> dict[str, Any]:
    """The JSON schema of a tool turn's reply: one branch per tool (its name, its parameters)
    and the answer; `forced` (tool_choice naming a tool) leaves only that tool's branch."""
    branches = []
    for tool in tools:
        fn = tool.get("function") or {}
        if forced is not None and fn.get("name") != forced:
            continue
        params = fn.get("parameters")
        branches.append(_branch(str(fn.get("name")), params if isinstance(params, dict)
                                and params else {"type": "object"}))
    if forced is None:
        branches.append(_branch(FINAL, _ANSWER_ARGS))
    return branches[0] if len(branches) == 1 else {"anyOf": branches}


def _branch(name: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"tool": {"const": name}, "arguments": params},
            "required": ["tool", "arguments"]}


def read_reply(text: str, tool_names: list[str]) -> dict[str, Any]:
    """A tool turn's constrained output as an OpenAI assistant message. An answer becomes its
    content; anything else that is not a call of a known tool (a reply cut off by max_tokens)
    is kept as the text it was: a model's mistake is shown, never hidden."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("tool"), str):
        return {"role": "assistant", "content": text}
    name, arguments = data["tool"], data.get("arguments")
    if name == FINAL and FINAL not in tool_names:
        answer = arguments.get("answer") if isinstance(arguments, dict) else arguments
        return {"role": "assistant", "content": answer if isinstance(answer, str)
                else json.dumps(answer, ensure_ascii=False)}
    if name not in tool_names:
        return {"role": "assistant", "content": text}
    call = {"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(
                arguments if arguments is not None else {}, ensure_ascii=False)}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}
