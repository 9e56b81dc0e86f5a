"""How a run looks in a terminal: one line (or a few) per finished step, coloured on a tty."""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from traces.schema import Step

COLOURS = {
    "llm": "35", "thought": "36", "tool": "33", "plan": "34", "reflection": "95",
    "evaluation": "94", "node": "34", "message": "32", "final": "1;32", "error": "1;31",
    "approval": "1;33", "user": "37", "guardrail": "1;91",
}


def _short(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe(step: Step) -> str:
    """The text shown for a finished step."""
    if step.kind == "llm":
        out = step.output or {}
        calls = ", ".join(c["name"] for c in out.get("tool_calls", []) or [])
        said = _short(out.get("text") or out.get("error") or "")
        extra = f" → calls {calls}" if calls else ""
        return (f"{step.name} {step.tokens_in}+{step.tokens_out} tok "
                f"{step.duration_ms or 0:.0f} ms{extra}: {said}")
    if step.kind == "tool":
        return f"{step.name}({_short(step.input, 120)}) → {_short(step.text)}"
    return _short(step.text or step.output or "")


class TerminalSink:
    """A StepSink that prints; agentlab.runs.execution.execute_run puts it beside the Recorder."""

    def __init__(self, stream: TextIO = sys.stdout, colour: bool | None = None) -> None:
        self.stream = stream
        self.colour = stream.isatty() if colour is None else colour

    def _paint(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.colour else text

    async def step(self, step: Step) -> None:
        if step.status == "running" and step.kind != "approval":
            return  # printed once, when it finishes
        label = f"{step.seq:>3} {step.kind:<10} {step.role:<10}"
        mark = " ✗" if step.status == "error" else ""
        print(f"{self._paint(COLOURS.get(step.kind, '0'), label)}{mark} {describe(step)}",
              file=self.stream, flush=True)

    async def token(self, seq: int, delta: str) -> None:
        return None

    async def status(self, status: str, detail: dict[str, Any]) -> None:
        return None
