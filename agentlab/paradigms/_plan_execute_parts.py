"""Plan-and-Execute helpers: output formats, the replanner's reply, text rendering (pure)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from agentlab.paradigms.parsing import (
    ParseError,
    iter_json_objects,
    parse_numbered_plan,
    unwrap_fence,
)

MAX_PLAN_STEPS = 7
# Bounds a constrained decoder holds the model to: a small model otherwise repeats a phrase
# until max_tokens cuts the JSON ("with get_weather.com.com.com…"), and the reply is lost.
STEP_CHARS = 160
ANSWER_CHARS = 1000
STEP_SCHEMA = {"type": "string", "minLength": 1, "maxLength": STEP_CHARS}

PLAN_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "plan",
        "strict": True,
        "schema": {
            "type": "object",
            # minItems: constrained decoding otherwise lets a small model answer "[]".
            "properties": {"steps": {"type": "array", "items": STEP_SCHEMA,
                                     "minItems": 1, "maxItems": MAX_PLAN_STEPS}},
            "required": ["steps"],
            "additionalProperties": False,
        },
    },
}
REPLAN_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "replan",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "action": {"enum": ["continue", "finish"]},
                "steps": {"type": "array", "items": STEP_SCHEMA, "maxItems": MAX_PLAN_STEPS},
                "answer": {"type": "string", "maxLength": ANSWER_CHARS},
            },
            "required": ["action", "steps", "answer"],
            "additionalProperties": False,
        },
    },
}
REPLAN_HINT = ('Reply with {"action": "continue", "steps": ["..."], "answer": ""} or '
               '{"action": "finish", "steps": [], "answer": "..."}.')

# Text fallbacks for a server that ignores the schema: "Final answer: ..." finishes; a numbered
# or bulleted list continues. Plain prose is neither (it would otherwise become a "step").
_FINAL_RE = re.compile(r"^[ \t*_#]*final[ \t]+answer[ \t*_]*:[ \t*_]*(?P<answer>.*)",
                       re.IGNORECASE | re.MULTILINE | re.DOTALL)
_LIST_LINE_RE = re.compile(r"^[ \t]*(?:\(?\d{1,3}[.)]|[-*+\u2022][ \t]|step[ \t]*\d)",
                           re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class Replan:
    """The replanner's decision: finish with `answer`, or continue with the remaining `steps`."""

    finish: bool
    steps: list[str] = field(default_factory=list)
    answer: str = ""


def parse_replan(text: str) -> Replan:
    """Read the replanner's reply: the JSON asked for, else "Final answer: …" or a list."""
    text = (text or "").strip()
    data = _json_object(text)
    if data is not None:
        return _from_json(data)
    if m := _FINAL_RE.search(text):
        answer = m.group("answer").strip()
        if answer:
            return Replan(finish=True, answer=answer)
        raise ParseError("'Final answer:' was followed by no answer. " + REPLAN_HINT)
    if _LIST_LINE_RE.search(text):
        return Replan(finish=False, steps=parse_numbered_plan(text))
    raise ParseError("Could not find the JSON object, a 'Final answer:' line or a numbered "
                     "list of remaining steps. " + REPLAN_HINT)


def _json_object(text: str) -> dict | None:
    try:
        data = json.loads(unwrap_fence(text))
    except ValueError:
        data = next((obj for _, _, obj in iter_json_objects(text)
                     if {"action", "steps", "answer"} & set(obj)), None)
    return data if isinstance(data, dict) else None


def _from_json(data: dict) -> Replan:
    if not {"action", "steps", "answer"} & set(data):
        raise ParseError('The JSON object has none of "action", "steps", "answer". '
                         + REPLAN_HINT)
    action = str(data.get("action", "")).strip().lower()
    answer = data.get("answer")
    answer = answer.strip() if isinstance(answer, str) else ""
    steps = data.get("steps")
    steps = [str(s) for s in steps] if isinstance(steps, list) else []
    if action == "finish" or (not action and answer and not steps):
        if not answer:
            raise ParseError('"action" is "finish" but "answer" is empty. ' + REPLAN_HINT)
        return Replan(finish=True, answer=answer)
    if action not in ("continue", ""):
        raise ParseError(f'"action" must be "continue" or "finish", not {action!r}. '
                         + REPLAN_HINT)
    cleaned = [" ".join(s.split()) for s in steps]
    return Replan(finish=False, steps=[s for s in cleaned if s])


def normalise(step: str) -> str:
    """The form two step texts are compared in: case, spacing and end punctuation ignored."""
    return " ".join(step.casefold().split()).rstrip(".!;: ")


def drop_repeats(steps: list[str], done: list[str]) -> tuple[list[str], list[str]]:
    """(kept, dropped): steps whose text repeats a finished step are dropped."""
    finished = {normalise(s) for s in done}
    kept = [s for s in steps if normalise(s) not in finished]
    return kept, [s for s in steps if normalise(s) in finished]


def numbered(steps: list[str], start: int = 1) -> str:
    return "\n".join(f"{i}. {s}" for i, s in enumerate(steps, start)) or "(none)"


def results_text(results: list[tuple[str, str]]) -> str:
    """Finished steps with their results, numbered, for the executor, replanner and solver."""
    if not results:
        return "(none yet)"
    return "\n".join(f"{i}. {step}\n   Result: {result}"
                     for i, (step, result) in enumerate(results, 1))
