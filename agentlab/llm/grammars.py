"""GBNF grammars the client sends to servers of the llama.cpp family (the embedded model) in
the request's `grammar` field, which llama.cpp's and llama-cpp-python's servers both read.

Only text ReAct needs one (its JSON turns go as a response_format schema): the shape of a turn,
"Thought: …" then "Action: <a tool>" and "Action Input: <its arguments>", or "Final Answer:
…" (`chatml.react_text_root`). Each tool's arguments are held to its schema by llama-cpp-python's
own JSON-schema converter; a grammar is built once per tool list and labels."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from agentlab.llm import chatml


def react_text_gbnf(fmt: dict[str, Any]) -> str | None:
    """The grammar of a text ReAct turn for a `chatml.REACT_TEXT` response format; None without
    llama-cpp-python (the server then gets the turn unconstrained)."""
    tools = [t for t in fmt.get("tools") or [] if isinstance(t, dict) and t.get("name")]
    if not tools:
        return None
    labels = fmt.get("labels") if isinstance(fmt.get("labels"), dict) else {}
    return _react_text(json.dumps([tools, labels, bool(fmt.get("final", True))],
                                  sort_keys=True))


@lru_cache(maxsize=64)
def _react_text(key: str) -> str | None:
    try:
        from llama_cpp.llama_grammar import SchemaConverter
    except ImportError:
        return None
    tools, labels, final = json.loads(key)
    converter = SchemaConverter(prop_order={}, allow_fetch=False, dotall=False,
                                raw_pattern=False)
    branches = []
    for i, tool in enumerate(tools):
        try:
            rule = converter.visit(chatml.closed(tool.get("parameters")), f"args{i}")
        except Exception:  # noqa: BLE001 (a schema the converter cannot read: any object)
            rule = converter.visit({"type": "object"}, f"args{i}")
        branches.append((str(tool["name"]), rule))
    return f"{chatml.react_text_root(labels, branches, final=final)}\n" \
           f"{converter.format_grammar()}"
