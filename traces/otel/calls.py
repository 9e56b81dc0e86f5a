"""Which LLM spans are model calls (pure): counts are of real calls. A framework's LLM span
with another LLM span inside it (the SDK's, instrumented too) wraps that one call; an LLM span
that records no call itself (no messages, tokens, finish reason or reply: LlamaIndex's
`_prepare_chat_with_tools`) beside one that does only prepares it. Both become thoughts, with
a note saying so."""

from __future__ import annotations

import re

from traces.otel import genai
from traces.otel import openinference as oi
from traces.otel.decode import Span
from traces.otel.values import parsed
from traces.schema import Step

WRAPPER = "wraps the model call below it (counted once, there)"
PREPARES = "prepares a model call beside it (counted once, there)"
_CALL_PREFIXES = ("llm.input_messages.", "llm.output_messages.", "llm.token_count.",
                  "gen_ai.usage.", "gen_ai.response.", "gen_ai.prompt.", "gen_ai.completion.")
_CALL_KEYS = {"llm.finish_reason", "gen_ai.input.messages", "gen_ai.output.messages"}
# The keys above, over the attribute names joined by newlines: one scan in C, not a Python
# test a name (a hundred names, an LLM span with its messages flattened).
_CALL_NAME = re.compile("^(?:" + "|".join(map(re.escape, _CALL_PREFIXES)) + "|(?:"
                        + "|".join(map(re.escape, sorted(_CALL_KEYS))) + ")$)", re.M)


def records_call(span: Span) -> bool:
    """Does the span record a model call itself: messages, tokens, a finish reason, a reply?"""
    a = span.attributes
    # The cheap tests first: parsing input.value (a whole request, often) comes last.
    return ("agentlab.step.kind" in a
            or _names_call(a)
            or any(name in genai.EVENTS for name, _w, _a in span.events)
            or oi.is_chat_request(parsed(a.get("input.value"))))


def _names_call(a: dict[str, object]) -> bool:
    names = "\n".join(a)
    if names.count("\n") == len(a) - 1:  # no name holds a newline: one line a name
        return _CALL_NAME.search(names) is not None
    return any(k.startswith(_CALL_PREFIXES) or k in _CALL_KEYS for k in a)


def demote(steps: list[Step], calls: set[int]) -> None:
    """Count real model calls only: an llm step with an llm step below it only wraps that
    call, and one that records no call (no messages, tokens or reply: LlamaIndex's
    `_prepare_chat_with_tools`) beside a step that does only prepares it; both are thoughts."""
    by_seq = {s.seq: s for s in steps}
    notes: dict[int, str] = {}
    for step in steps:
        if step.kind != "llm":
            continue
        parent = by_seq.get(step.parent) if step.parent is not None else None
        while parent is not None:
            if parent.kind == "llm":
                notes[parent.seq] = WRAPPER
            parent = by_seq.get(parent.parent) if parent.parent is not None else None
        if step.seq not in calls and any(s.kind == "llm" and s.parent == step.parent
                                         and s.seq in calls for s in steps):
            notes[step.seq] = PREPARES
    for seq, why in notes.items():
        note(by_seq[seq], why)


def note(step: Step, why: str) -> None:
    """The llm step is no model call (WRAPPER or PREPARES): a thought saying why."""
    step.kind, step.tokens_in, step.tokens_out, step.cost_usd = "thought", 0, 0, 0.0
    step.meta["otel.note"] = why
