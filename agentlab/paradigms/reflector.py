"""Reflectors: look at one observation and say whether the plan still holds, and what next.

RuleReflector knows the common failure texts of our tools; LLMReflector asks a model (role
"reflector") for JSON and falls back to the rule verdict when the reply is not usable.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from agentlab.paradigms.prompt_files import load_prompt
from traces.schema import Step, normalise_args

if TYPE_CHECKING:
    from agentlab.runtime.context import RunContext


@dataclass
class Reflection:
    goal_achieved: bool
    plan_valid: bool
    suggestion: str
    rule: str  # which rule decided ("llm" when a model did)
    meta: dict[str, Any] = field(default_factory=dict)


class Reflector(Protocol):
    async def reflect(self, ctx: RunContext, *, task: str, action: str, arguments: Any,
                      observation: str, ok: bool, history: list[dict[str, Any]],
                      parent: int | None = None) -> Reflection:
        """Judge one action's observation; `history` holds earlier {"action", "arguments"}."""


def _has(text: str, *needles: str) -> bool:
    return any(n in text for n in needles)


_EMPTY_RE = re.compile(r"^\s*(\[\s*\]|\{\s*\}|\(\s*\)|none|null|)\s*$|\b0 rows\b|\bno results?\b"
                       r"|\bno matches\b|\bnothing found\b", re.IGNORECASE)
_FIELD_RE = re.compile(r"""['"`](?P<name>[A-Za-z_][\w.]*)['"`]""")


def _field_name(observation: str) -> str | None:
    match = _FIELD_RE.search(observation)
    return match["name"] if match else None


def _rules(action: str, arguments: Any, observation: str, ok: bool,
           history: list[dict[str, Any]]) -> tuple[str, str] | None:
    """(rule, suggestion) for the first rule that matches, or None when the plan looks fine."""
    low = observation.lower()
    if history and history[-1].get("action") == action and normalise_args(
            history[-1].get("arguments")) == normalise_args(arguments):
        return "repeated_action", (f"You already called {action} with these arguments; the "
                                   "result will not change. Try something different.")
    if ok:
        if _EMPTY_RE.search(observation):
            return "empty_result", ("The call returned nothing. Relax the query: fewer filters, "
                                    "broader terms, check the spelling.")
        return None
    # Only failed calls are read for error texts: a fetched page may well say "timeout".
    if _has(low, "no such column", "no such table", "unknown column") or (
            "does not exist" in low and _has(low, "column", "relation", "table")):
        return "schema", ("The query names a table or column that does not exist. Call "
                          "list_tables, then describe_table, and use the real names.")
    if _has(low, "connection refused", "unreachable", "could not connect", "name resolution",
            "connection error"):
        return "unreachable", ("The source could not be reached. Retry later or use another "
                               "source or tool.")
    if _has(low, "unknown tool", "no such tool", "no tool named", "not a known tool"):
        return "unknown_tool", ("That tool does not exist. Use only the listed tools, by their "
                                "exact name.")
    if _has(low, "validation error", "invalid argument", "is a required property", "missing",
            "required argument", "invalid value", "unexpected argument", "is not of type"):
        name = _field_name(observation)
        where = f"the field {name!r}" if name else "the named field"
        return "validation", f"The arguments were rejected. Fix {where} and call the tool again."
    if _has(low, "timed out", "timeout"):
        return "timeout", "The call took too long. Narrow the request (fewer rows, a filter)."
    if _has(low, "permission denied", "not allowed", "forbidden", "denied", "disabled"):
        return "permission", ("You are not allowed to do that. Do not retry it; use another "
                              "tool or answer with what you have.")
    return "error", "The call failed. Read the error, change the arguments or the tool."


class RuleReflector:
    """Cheap, deterministic reflection from the observation's text."""

    async def reflect(self, ctx: RunContext, *, task: str, action: str, arguments: Any,
                      observation: str, ok: bool, history: list[dict[str, Any]],
                      parent: int | None = None) -> Reflection:
        """Judge one observation by the rules above."""
        return self.verdict(action, arguments, observation, ok, history)

    @staticmethod
    def verdict(action: str, arguments: Any, observation: str, ok: bool,
                history: list[dict[str, Any]]) -> Reflection:
        found = _rules(action, arguments, observation, ok, history)
        if found is None:
            return Reflection(goal_achieved=False, plan_valid=True, rule="ok",
                              suggestion="The plan is on track; continue or answer if done.")
        rule, suggestion = found
        return Reflection(goal_achieved=False, plan_valid=False, rule=rule, suggestion=suggestion)


REFLECTION_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "reflection",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "goal_achieved": {"type": "boolean"},
                "plan_valid": {"type": "boolean"},
                "suggestion": {"type": "string"},
            },
            "required": ["goal_achieved", "plan_valid", "suggestion"],
            "additionalProperties": False,
        },
    },
}


class LLMReflector:
    """Asks the "reflector" model; a reply that is not the JSON asked for gets the rule verdict."""

    role = "reflector"

    async def reflect(self, ctx: RunContext, *, task: str, action: str, arguments: Any,
                      observation: str, ok: bool, history: list[dict[str, Any]],
                      parent: int | None = None) -> Reflection:
        """Judge one observation with a model call."""
        prompt = load_prompt("reflector.txt")
        user = (f"Task: {task}\nAction: {action}\n"
                f"Arguments: {json.dumps(arguments, default=str)}\n"
                f"Succeeded: {'yes' if ok else 'no'}\nObservation:\n{observation}")
        result = await ctx.llm(self.role, [{"role": "system", "content": prompt},
                                           {"role": "user", "content": user}],
                               response_format=REFLECTION_FORMAT, parent=parent)
        try:
            data = json.loads(result.text or "")
            if not (isinstance(data, dict) and isinstance(data.get("goal_achieved"), bool)
                    and isinstance(data.get("plan_valid"), bool)
                    and isinstance(data.get("suggestion"), str)):
                raise ValueError("missing or mistyped keys")
        except ValueError as exc:
            fallback = RuleReflector.verdict(action, arguments, observation, ok, history)
            fallback.meta["fallback"] = f"the reflector's reply was not usable JSON ({exc})"
            return fallback
        return Reflection(goal_achieved=data["goal_achieved"], plan_valid=data["plan_valid"],
                          suggestion=data["suggestion"].strip(), rule="llm")


def make_reflector(kind: str) -> Reflector | None:
    """"none" -> None, "rule" -> RuleReflector, "llm" -> LLMReflector."""
    if kind == "none":
        return None
    if kind == "rule":
        return RuleReflector()
    if kind == "llm":
        return LLMReflector()
    raise ValueError(f"unknown reflector {kind!r}; use none, rule or llm")


async def record_reflection(ctx: RunContext, reflection: Reflection, *,
                            parent: int | None = None) -> Step:
    """Emit a `reflection` step (role "reflector") and count it in the totals."""
    ctx.totals.reflections += 1
    return await ctx.emit(Step(
        kind="reflection", role="reflector", name=reflection.rule, parent=parent,
        text=reflection.suggestion,
        output={"goal_achieved": reflection.goal_achieved, "plan_valid": reflection.plan_valid,
                "suggestion": reflection.suggestion, "rule": reflection.rule},
        meta={"rule": reflection.rule, **reflection.meta},
    ))
