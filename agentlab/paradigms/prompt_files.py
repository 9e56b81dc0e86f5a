"""Prompt templates are data files in prompts/; load_prompt() reads one by name."""

from __future__ import annotations

import math
import re
from functools import cache
from importlib import resources


@cache
def load_prompt(name: str) -> str:
    """The text of prompts/<name>, without the trailing newline."""
    path = resources.files("agentlab.paradigms").joinpath("prompts", name)
    return path.read_text(encoding="utf-8").rstrip("\n")


def fill(template: str, **values: str) -> str:
    """Replace {name} placeholders; other braces (JSON examples) are left alone."""
    for key, value in values.items():
        template = template.replace("{" + key + "}", value)
    return template


def few_shot_schema(description: str) -> dict:
    """A params field of example chat turns shown before the real ones (a small model copies
    a shown exchange far better than one described in the prompt)."""
    return {
        "type": "array", "default": [], "maxItems": 24, "description": description,
        "items": {"type": "object", "required": ["role"],
                  "properties": {"role": {"enum": ["user", "assistant", "tool"]},
                                 "content": {"type": ["string", "null"]},
                                 "tool_calls": {"type": "array"},
                                 "tool_call_id": {"type": "string"}}}}


def example_turns(turns: list[dict] | None) -> list[dict]:
    """Copies of a params field's example turns, safe to append to."""
    return [dict(m) for m in turns or []]


_WORD = re.compile(r"\w+")
_COMMON = frozenset({"a", "an", "and", "are", "do", "does", "for", "how", "in", "is", "it", "many",
                     "much", "of", "on", "or", "right", "now", "the", "this", "to", "what",
                     "which", "who", "with"})


def _words(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.casefold())) - _COMMON


def similar_last(turns: list[dict], task: str, keep: int = 0) -> list[dict]:
    """Example turns in (user, assistant) pairs, reordered so that the pair whose user turn
    shares the most words with `task` comes last (ties keep their order: with nothing in
    common, the given order, whose last example is then the general one). A small model
    imitates the example it read last (Liu et al. 2021, "What Makes Good In-Context Examples
    for GPT-3?", put the most similar example nearest the question). `keep` > 0: only that
    many, the most similar (examples of other kinds of task crowd a small model's prompt).
    Turns that are not user/assistant pairs (tool turns, a missing reply) keep their order:
    cutting them into pairs would give one example's answer to another's question."""
    if len(turns) % 2 or any(t.get("role") != ("user", "assistant")[i % 2]
                             for i, t in enumerate(turns)):
        return example_turns(turns)
    pairs = [turns[i:i + 2] for i in range(0, len(turns), 2)]
    wanted = _words(task)

    def score(pair: list[dict]) -> float:
        words = _words(str(pair[0].get("content") or ""))
        return len(words & wanted) / math.sqrt(len(words) * len(wanted) or 1)

    ordered = sorted(pairs, key=score)
    return [dict(m) for pair in ordered[-keep if keep > 0 else 0:] for m in pair]
