"""The embedded model's prompt and tool calls, as our own server-side chat handler builds them
(`agentlab.llm.embedded_server` runs it inside llama-cpp-python's server). Pure: no llama_cpp.

Why our own: llama-cpp-python's `chatml-function-calling` renders its Jinja template with HTML
autoescaping on (`"` reached the model as `&#34;`), drops `role: tool` messages, and spends
two to four unbounded completions on a tool turn. Here the prompt is plain ChatML built by
string concatenation (nothing is escaped), tool results are user turns that name their tool,
and a tool turn is one completion constrained by a grammar: either SmolLM2's own call format,
`<tool_call>[{"name": <a tool's name>, "arguments": <that tool's parameters>}]</tool_call>`
(JSON-schema-constrained), or an answer in plain text; read back into OpenAI's shape."""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from typing import Any

IM_START, IM_END = "<|im_start|>", "<|im_end|>"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"

Piece = tuple[str, bool]  # (text, whether it is a special marker rather than content)


def tool_section(tools: list[dict[str, Any]]) -> str:
    """What the system message says about the tools: the format SmolLM2 was tuned on for
    function calling (its model card), kept short: a 135M model reads it on every turn."""
    listed = [{"name": (t.get("function") or {}).get("name"),
               "description": " ".join(str((t.get("function") or {}).get("description")
                                           or "").split()),
               "parameters": (t.get("function") or {}).get("parameters") or {}}
              for t in tools]
    return ("You have access to the following tools:\n"
            f"<tools>{json.dumps(listed, ensure_ascii=False)}</tools>\n\n"
            "When the question needs facts you do not have, call a tool, replying with only:\n"
            f'{CALL_OPEN}[{{"name": "<tool name>", "arguments": {{...}}}}]{CALL_CLOSE}\n'
            "When the tool results answer the question, reply with the answer in plain text.")


def call_text(calls: list[tuple[str, Any]]) -> str:
    """Tool calls as the model writes them (and as earlier calls are shown to it again)."""
    shown = []
    for name, arguments in calls:
        if isinstance(arguments, str):
            with contextlib.suppress(ValueError):  # else shown as the text it was
                arguments = json.loads(arguments) if arguments.strip() else {}
        shown.append({"name": name, "arguments": arguments})
    return f"{CALL_OPEN}{json.dumps(shown, ensure_ascii=False)}{CALL_CLOSE}"


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
                calls.append((str(fn.get("name") or ""), fn.get("arguments") or {}))
            content = "\n".join(([content] if content.strip() else []) + [call_text(calls)])
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
    """The JSON schema of one call: one branch per tool (its name, its parameters); `forced`
    (tool_choice naming a tool) leaves only that tool's branch."""
    branches = []
    for tool in tools:
        fn = tool.get("function") or {}
        if forced is not None and fn.get("name") != forced:
            continue
        branches.append({"type": "object", "properties": {
            "name": {"const": str(fn.get("name"))}, "arguments": closed(fn.get("parameters"))},
            "required": ["name", "arguments"]})
    return branches[0] if len(branches) == 1 else {"anyOf": branches}


def closed(params: Any) -> dict[str, Any]:
    """A tool's parameters as a constraint: no properties beyond the listed ones unless the
    schema says otherwise (a small model otherwise copies the last result's keys into them)."""
    if not isinstance(params, dict) or not params:
        return {"type": "object"}
    if params.get("type") == "object" and "properties" in params:
        return {"additionalProperties": False, **params}
    return params


def call_grammar(call_gbnf: str, *, forced: bool) -> str:
    """The GBNF of a tool turn: `<tool_call>[call, …]</tool_call>` (the call's GBNF is the
    schema's, its root renamed), or — unless a tool is forced — an answer in plain text that
    does not start with "<"."""
    rules = re.sub(r"^root ::=", "agentlab-call ::=", call_gbnf, flags=re.MULTILINE)
    calls = f'"{CALL_OPEN}[" agentlab-call ("," space agentlab-call)* "]{CALL_CLOSE}"'
    root = calls if forced else f'{calls} | agentlab-text'
    text = '' if forced else '\nagentlab-text ::= [^<\\x00] [^\\x00]*'
    space = '' if re.search(r"^space ::=", rules, flags=re.MULTILINE) else '\nspace ::= " "?'
    return f"root ::= {root}{text}{space}\n{rules}"


REACT_TEXT = "react_text"  # our response_format type: text ReAct's shape, as a grammar
THOUGHT_CHARS = 200  # the longest thought ReAct's JSON schema and text grammar let through
# The longest answer ReAct's JSON schema lets through: with the thought it fits a turn's
# max_tokens, so a small model that rambles gets a closed string, not JSON cut off mid-answer.
ANSWER_CHARS = 400
REACT_TEXT_LABELS = {"thought": ["Thought"], "action": ["Action"],
                     "action_input": ["Action Input"], "final_answer": ["Final Answer"]}


def gbnf_literal(text: str) -> str:
    """`text` as a GBNF string literal (UTF-8 kept as it is)."""
    escaped = (text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
               .replace("\r", "\\r"))
    return f'"{escaped}"'


def label_rule(names: list[str] | None, fallback: list[str]) -> str:
    """A marker's alternatives ("Thought: " | "Gedanke: ") as a GBNF expression; `fallback`
    when the format named none."""
    named = [str(n).strip() for n in names or [] if str(n).strip()]
    return " | ".join(gbnf_literal(f"{n}: ") for n in dict.fromkeys(named or fallback))


def line_rule(name: str, chars: int | None = None, *, also_not: str = "") -> str:
    """`name` as one line of text (nothing that ends it, nor the characters of `also_not`),
    at most `chars` long when given."""
    repeat = f"{{1,{chars}}}" if chars else "+"
    return f"{name} ::= [^{also_not}\\n\\x00]{repeat}"


def react_text_root(labels: dict[str, list[str]], tools: list[tuple[str, str]], *,
                    final: bool) -> str:
    """The GBNF rules of one text ReAct turn: a thought on one line, then either an action (one
    of `tools`: (name, the rule of its arguments as JSON)) or, when `final`, a final answer on
    one line. A turn that must act has no final branch: the model cannot answer from memory
    first, as SmolLM2 does when it may."""
    def label(key: str) -> str:
        return label_rule(labels.get(key), REACT_TEXT_LABELS[key])

    calls = " | ".join(f'{gbnf_literal(name)} "\\n" input-label {rule}' for name, rule in tools)
    rules = [f"root ::= thought-label thought \"\\n\" ({'act | final' if final else 'act'})",
             f"thought-label ::= {label('thought')}",
             f"act ::= action-label ({calls})",
             f"action-label ::= {label('action')}",
             f"input-label ::= {label('action_input')}",
             line_rule("line"),
             # A bounded thought: one that went on reasoning ran out of max_tokens before
             # its action.
             line_rule("thought", THOUGHT_CHARS)]
    if final:
        rules += ["final ::= answer-label line", f"answer-label ::= {label('final_answer')}"]
    return "\n".join(rules)


def read_reply(text: str, tool_names: list[str]) -> dict[str, Any]:
    """A tool turn's output as an OpenAI assistant message: `<tool_call>[…]</tool_call>` of
    known tools become tool_calls; anything else (plain text, or a call cut off by max_tokens)
    is kept as the text it was: a model's mistake is shown, never hidden."""
    body = text.strip()
    if not body.startswith(CALL_OPEN):
        return {"role": "assistant", "content": text}
    try:
        data = json.loads(body[len(CALL_OPEN):].removesuffix(CALL_CLOSE))
    except ValueError:
        return {"role": "assistant", "content": text}
    data = data if isinstance(data, list) else [data]
    calls = []
    for item in data:
        if not isinstance(item, dict) or item.get("name") not in tool_names:
            return {"role": "assistant", "content": text}
        arguments = item.get("arguments")
        calls.append({"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
                      "function": {"name": item["name"], "arguments": json.dumps(
                          arguments if arguments is not None else {}, ensure_ascii=False)}})
    return {"role": "assistant", "content": None, "tool_calls": calls}
