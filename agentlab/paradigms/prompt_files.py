"""Prompt templates are data files in prompts/; load_prompt() reads one by name."""

from __future__ import annotations

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
