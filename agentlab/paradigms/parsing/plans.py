"""Plan parsers: ReWOO plans and Plan-and-Execute step lists (package-private)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentlab.paradigms.parsing.common import (
    FENCE_RE,
    ParseError,
    bracket_span,
    load_value,
    strip_quotes,
)

REWOO_FORMAT = (
    "Write each step as a plan line followed by one tool call, e.g.:\n"
    "Plan: <why this step>\n"
    "#E1 = <Tool>[<input>]\n"
    "Plan: <next step>\n"
    "#E2 = <Tool>[<input, may use #E1>]"
)
NUMBERED_PLAN_FORMAT = (
    "Reply with a numbered list, one step per line, e.g.:\n1. <first step>\n2. <second step>"
)


@dataclass(frozen=True)
class PlanStep:
    plan: str
    var: str  # normalised "#E<n>"
    tool: str
    tool_input: str
    depends_on: tuple[str, ...]  # "#E<n>" referenced in tool_input, in order, deduplicated


# "#E1 = Tool[" (also "E1 = ...", "#E1: Tool(", "#e1 := Tool ["): a step's head, up to its bracket.
# The lookbehind keeps "#E1" from starting inside "x#E1" and "E1" from being the tail of "#E1".
_STEP = r"""(?<![\w\#])\#?E(?P<n>\d{1,2})(?!\d)[ \t]*(?::=|=|:)[ \t]*
            [`*]*(?P<tool>[A-Za-z_][\w.-]*)[`*]*[ \t]*(?P<open>[\[(])"""
_STEP_RE = re.compile(_STEP, re.IGNORECASE | re.VERBOSE)
# A "Plan:" marker at a line start: "Plan:", "**Plan 2:**", "- Plan:", "Step 1:", "1. Plan -".
_PLAN = r"""^[ \t]*(?:[-*+>\#]+[ \t]*|\d+[.)][ \t]*)?(?:\*\*|__)?[ \t]*(?:plan|step)[ \t]*
            (?:\d+[ \t]*(?:\*\*|__)?[ \t]*[:.)-]|(?:\*\*|__)?[ \t]*:)[ \t]*(?:\*\*|__)?"""
_PLAN_RE = re.compile(_PLAN, re.IGNORECASE | re.MULTILINE | re.VERBOSE)
# The next line that starts a new plan or step: an unbalanced input must not run into it.
_BOUNDARY_RE = re.compile(
    rf"\n(?=(?:{_PLAN})|[ \t]*(?:[-*+]\s*)?(?:{_STEP}))", re.IGNORECASE | re.MULTILINE | re.VERBOSE
)
# An evidence reference as a whole token: "#E1" but not the start of "#E10" or "#E1x".
_REF_RE = re.compile(r"(?<![\w#])#E(\d{1,2})(?!\w)", re.IGNORECASE)
_FENCE_LINE_RE = re.compile(r"^[ \t]*```.*$", re.MULTILINE)


def _var(number: str) -> str:
    return f"#E{int(number)}"


def parse_rewoo_plan(text: str) -> list[PlanStep]:
    """Read a ReWOO planner's reply into its steps, in order.

    A step's plan is the text after the last step (from its first ``Plan:`` marker, lines joined)
    up to ``#E<n> = Tool[input]``. Duplicate or forward references are kept as written: the
    worker reports them, so the planner can be told exactly which step is wrong.
    """
    text = (text or "").replace("\r\n", "\n")
    steps: list[PlanStep] = []
    pos = 0
    while (m := _STEP_RE.search(text, pos)) is not None:
        boundary = _BOUNDARY_RE.search(text, m.end())
        limit = boundary.start() if boundary else len(text)
        inner_start, close = bracket_span(text, m.start("open"), limit)
        tool_input = strip_quotes(text[inner_start:close])
        refs = tuple(dict.fromkeys(_var(n) for n in _REF_RE.findall(tool_input)))
        steps.append(
            PlanStep(
                _plan_text(text[pos : m.start()]),
                _var(m.group("n")),
                m.group("tool"),
                tool_input,
                refs,
            )
        )
        pos = max(close + 1, m.end())
    if not steps:
        found = "Found 'Plan:' lines but no" if _PLAN_RE.search(text) else "Could not find any"
        raise ParseError(f"{found} step of the form '#E1 = Tool[input]'. " + REWOO_FORMAT)
    return steps


def _plan_text(region: str) -> str:
    """The reasoning before a step: from its first Plan marker on, wrapped lines joined."""
    region = _FENCE_LINE_RE.sub("", region.lstrip())
    markers = list(_PLAN_RE.finditer(region))
    if markers:
        region = _PLAN_RE.sub(" ", region[markers[0].end() :])
    return " ".join(region.split()).strip("*_ ")


def resolve_refs(text: str, evidence: Mapping[str, str]) -> str:
    """Replace whole-token ``#E<n>`` references with their evidence; unknown ones stay.

    One pass, so evidence that itself contains "#E2" is not expanded again, and "#E10" is never
    touched by "#E1"'s value. Keys may be written "#E1", "E1" or "#e1".
    """
    values = {_var(k.lstrip("#")[1:]): str(v) for k, v in evidence.items() if _is_var(k)}
    return _REF_RE.sub(lambda m: values.get(_var(m.group(1)), m.group(0)), text)


def _is_var(key: str) -> bool:
    return re.fullmatch(r"#?[Ee]\d{1,2}", key.strip()) is not None


# The start of a numbered item: "1. ", "2) ", "(3) ", "Step 4: ", "**Step 5.**", "### Step 6 -".
_NUMBERED_RE = re.compile(
    r"""^[ \t]*(?:\#+[ \t]*)?(?:\*\*|__)?[ \t]*
        (?:step[ \t]*\d{1,3}[ \t]*(?:\*\*|__)?[ \t]*[:.)\u2013-]
          |\(?\d{1,3}[.)](?=[ \t]|[^\W\d_])   # "1. x", "1)x", "1.Search" but not "3.5 kg"
        )[ \t]*(?:\*\*|__)?[ \t]*""",
    re.IGNORECASE | re.VERBOSE,
)
# A bullet: "- ", "* ", "+ ", "• ".
_BULLET_RE = re.compile(r"^[ \t]*[-*+\u2022][ \t]+")
_JSON_STEP_KEYS = ("steps", "plan", "tasks")
_JSON_ITEM_KEYS = ("step", "description", "task", "text", "action", "name")


def parse_numbered_plan(text: str) -> list[str]:
    """Read a Plan-and-Execute plan into step texts, in order, without empty or duplicate steps.

    JSON (``{"steps": [...]}`` or a list, maybe fenced) wins; then numbered items ("1.", "1)",
    "Step 1:"), in which bullets are details of the current step; then bullets; then, with
    neither, each non-empty line that is not a heading ending in ":".
    """
    text = (text or "").replace("\r\n", "\n")
    items = _json_steps(text)
    if items is None and text.lstrip().startswith('{"'):
        # JSON cut off by the length limit or broken: read as lines, the whole object would
        # become one step (and the executor would be asked to "do" it).
        raise ParseError("The plan is a JSON object that could not be read (cut off or "
                         'invalid). Reply with {"steps": [...]}, each step a short string.')
    if items is None:
        items = _list_steps(_FENCE_LINE_RE.sub("", text))
    seen: set[str] = set()
    steps: list[str] = []
    for item in items:
        step = " ".join(_strip_item_marker(item).replace("**", "").split())
        if step and step.casefold() not in seen:
            seen.add(step.casefold())
            steps.append(step)
    if not steps:
        raise ParseError("Could not find any plan steps. " + NUMBERED_PLAN_FORMAT)
    return steps


def _json_steps(text: str) -> list[str] | None:
    candidates = [m.group("body") for m in FENCE_RE.finditer(text)] + [text]
    for candidate in candidates:
        candidate = candidate.strip()
        if not candidate.startswith(("{", "[")):
            continue
        loaded = load_value(candidate)
        value: Any = loaded[0] if loaded else None
        if isinstance(value, dict):
            value = next(
                (value[k] for k in _JSON_STEP_KEYS if isinstance(value.get(k), list)), None
            )
        if isinstance(value, list):
            return [_json_item(v) for v in value]
    return None


def _json_item(value: Any) -> str:
    if isinstance(value, dict):
        found = next((value[k] for k in _JSON_ITEM_KEYS if isinstance(value.get(k), str)), None)
        return found if found is not None else json.dumps(value)
    return value if isinstance(value, str) else json.dumps(value)


def _strip_item_marker(item: str) -> str:
    item = _NUMBERED_RE.sub("", item, count=1)
    return _BULLET_RE.sub("", item, count=1).strip()


def _list_steps(text: str) -> list[str]:
    lines = text.split("\n")
    if any(_NUMBERED_RE.match(line) for line in lines):
        starts = _NUMBERED_RE
    elif any(_BULLET_RE.match(line) for line in lines):
        starts = _BULLET_RE
    else:  # plain lines; "Here is the plan:" style headings are not steps
        return [line for line in lines if line.strip() and not line.rstrip().endswith(":")]
    items: list[str] = []
    open_item = False  # whether the next line may continue the current item
    for line in lines:
        if starts.match(line):
            items.append(line)
            open_item = True
        elif not line.strip():
            open_item = False
        elif items and (open_item or line[:1] in " \t"):  # wrapped or indented detail
            items[-1] += " " + _strip_item_marker(line)
            open_item = True
    return items
