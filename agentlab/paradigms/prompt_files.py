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
