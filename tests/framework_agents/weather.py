"""What every agent here shares: the question, the model's name and the tool's answer."""

from __future__ import annotations

import os
import sys

MODEL = os.environ.get("AGENT_MODEL", "gpt-4o-mini")
INSTRUCTIONS = "You report the weather. Use the get_weather tool, then answer in one sentence."


def question() -> str:
    """The question given on the command line."""
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} QUESTION")
    return sys.argv[1]


def weather(city: str) -> str:
    """The tool's answer: $WEATHER, so two runs can differ in exactly one tool result."""
    return os.environ.get("WEATHER", "sunny, 21 °C")
