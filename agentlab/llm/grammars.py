"""GBNF grammars the client sends to servers of the llama.cpp family (the embedded model) in
the request's `grammar` field, which llama.cpp's and llama-cpp-python's servers both read.

Some of our paradigms' turns are text, not JSON, and get a grammar through a response format
of our own (`OWN_FORMATS`; other servers are sent the turn without it and the parsers read what
they write):
- text ReAct: "Thought: …" then "Action: <a tool>" and "Action Input: <its arguments>", or
  "Final Answer: …" (`chatml.react_text_root`). Each tool's arguments are held to its schema by
  llama-cpp-python's own JSON-schema converter; a grammar is built once per tool list and labels.
- a ReWOO plan: "Plan: …" then "#E<n> = <a tool or LLM>[<input>]", numbered in order.
- a Self-Ask turn: one line, a follow-up question or the final answer;
- a judgement: one line of reasoning, then "Score: N" (LATS's evaluator).
"""

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


REWOO_PLAN = "rewoo_plan"  # our response_format type: a ReWOO plan, as a grammar
PLAN_LINE_CHARS = 200  # a plan's description and a step's input, each at most this long


def rewoo_plan_gbnf(fmt: dict[str, Any]) -> str | None:
    """The grammar of a ReWOO plan for a `REWOO_PLAN` response format: up to `max_steps` steps,
    each "Plan: <one line>" and "#E<n> = <tool>[<input>]" with n counting from 1 and the tool
    one of `tools` (a 135M planner otherwise invents tools, "get_temperature", and numbers)."""
    tools = [str(t) for t in fmt.get("tools") or [] if str(t).strip()]
    max_steps = fmt.get("max_steps")
    if not tools or not isinstance(max_steps, int) or max_steps < 1:
        return None
    calls = " | ".join(chatml.gbnf_literal(t) for t in dict.fromkeys(tools))
    rules = ["root ::= step1",
             f"tool ::= {calls}",
             # No "#" in a plan's line: SmolLM2 wrote the step's call there as well.
             chatml.line_rule("line", PLAN_LINE_CHARS, also_not="#"),
             chatml.line_rule("input", PLAN_LINE_CHARS, also_not="\\]")]
    for n in range(1, max_steps + 1):
        after = f" step{n + 1}?" if n < max_steps else ""
        rules.append(f'step{n} ::= "Plan: " line "\\n#E{n} = " tool "[" input "]\\n"{after}')
    return "\n".join(rules)


SELF_ASK = "self_ask"  # our response_format type: one Self-Ask turn, as a grammar
SELF_ASK_LABELS = {"follow_up": ["Follow up"], "final_answer": ["So the final answer is"]}
NEEDED = "Are follow up questions needed here: "


def self_ask_gbnf(fmt: dict[str, Any]) -> str | None:
    """The grammar of one Self-Ask turn for a `SELF_ASK` response format: on the first turn
    (`first`) the "Are follow up questions needed here:" line, then one line, either a
    follow-up question or (unless `final` is False: a turn that must ask) the final answer;
    `follow` False leaves only the answer. The labels are the agent's markers' alternatives.
    The reply ends with that line, where the server would otherwise have to stop at
    "Intermediate answer:"."""
    labels = fmt.get("labels") if isinstance(fmt.get("labels"), dict) else {}

    def label(key: str) -> str:
        return chatml.label_rule(labels.get(key), SELF_ASK_LABELS[key])

    final, follow = bool(fmt.get("final", True)), bool(fmt.get("follow", True))
    needed = (f'{chatml.gbnf_literal(NEEDED)} ("Yes." | "No.") "\\n" '
              if final else f'{chatml.gbnf_literal(NEEDED + "Yes.")} "\\n" ')
    turn = "(follow | answer)" if final and follow else "follow" if follow else "answer"
    rules = [f"root ::= {needed if fmt.get('first') else ''}{turn}",
             f"follow ::= ({label('follow_up')}) line",
             chatml.line_rule("line", PLAN_LINE_CHARS)]
    if final:
        rules.append(f"answer ::= ({label('final_answer')}) line")
    return "\n".join(rules)


SCORED = "scored"  # our response_format type: a line of reasoning, then "Score: N"


def scored_gbnf(fmt: dict[str, Any]) -> str | None:
    """The grammar of a judgement for a `SCORED` response format: one line of reasoning, then
    "Score: " and a whole number from `low` to `high` (SmolLM2 otherwise went on with another
    question, or wrote no score at all, and the node went unscored)."""
    low, high = fmt.get("low"), fmt.get("high")
    if not (isinstance(low, int) and isinstance(high, int) and 0 <= low < high <= 100):
        return None
    numbers = " | ".join(chatml.gbnf_literal(str(n)) for n in range(high, low - 1, -1))
    return "\n".join([f'root ::= line "\\nScore: " ({numbers})',
                      chatml.line_rule("line", PLAN_LINE_CHARS)])


# Our own response formats: the type, and the grammar that carries it to the embedded model.
OWN_FORMATS = {chatml.REACT_TEXT: react_text_gbnf, REWOO_PLAN: rewoo_plan_gbnf,
               SELF_ASK: self_ask_gbnf, SCORED: scored_gbnf}
