"""Tolerant parsers for LLM output, shared by the paradigms. Pure Python, no Django.

Every parser returns typed values or raises :class:`ParseError`, whose message is meant for the
model: it says what was wrong and restates the expected format, so the paradigm can send it back
as the next observation instead of failing the run.

Choices that callers rely on:

* ``parse_react``: the first decision wins (an Action before a Final Answer is an action; the
  model must see the observation first). A hallucinated ``Observation:`` and everything after it
  is ignored; an ``Observation:`` before any decision (an echo of the last one) is skipped.
  ``Answer:`` counts as final only when there is no action. ``Action: None`` / ``N/A`` is no
  action. A tool with no input gets ``""``; the tool executor validates arguments, not the parser.
  ``<think>`` blocks are never parsed for actions (only used as the thought when nothing else is).
* ``parse_rewoo_plan``: duplicate and forward ``#E`` references are kept (the worker reports
  them); inputs balance their brackets, else run to the last closing bracket on the line.
* ``parse_self_ask``: the latest of "unanswered Follow up" and "final answer" wins. A bare answer
  after "Are follow up questions needed here: No." is an error, so the caller spends one more
  call asking for the ``So the final answer is:`` line rather than guessing which text is the
  answer.
* ``parse_score``: explicit forms first ([[7]], "Score: 7/10", "9 out of 10", **8**), then the
  last plain number; numbers in labels like "Step 2" or ranges like "(1-10)" are never scores.
  "x/y" with y != high is rescaled to the caller's scale ("4/5" -> 8.0 on 0..10).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from agentlab.paradigms._parse_common import ParseError
from agentlab.paradigms._parse_plans import (
    PlanStep,
    parse_numbered_plan,
    parse_rewoo_plan,
    resolve_refs,
)
from agentlab.paradigms._parse_react import ReactAction, ReactFinal, parse_react

__all__ = [
    "FollowUp",
    "ParseError",
    "PlanStep",
    "ReactAction",
    "ReactFinal",
    "SelfAskFinal",
    "parse_numbered_plan",
    "parse_react",
    "parse_rewoo_plan",
    "parse_score",
    "parse_self_ask",
    "resolve_refs",
]

# --------------------------------------------------------------------------------- Self-Ask

SELF_ASK_FORMAT = (
    "Reply in this format:\n"
    "Are follow up questions needed here: Yes.\n"
    "Follow up: <one question>\n"
    "or, when you know the answer:\n"
    "So the final answer is: <the answer>"
)


@dataclass(frozen=True)
class FollowUp:
    question: str


@dataclass(frozen=True)
class SelfAskFinal:
    answer: str


# The Self-Ask markers (Press et al. 2022), anywhere in the text, case-insensitive, any spacing
# around the colon. "needed" comes first: it contains "follow up" too (without a colon).
# "Question:" only at a line start; it bounds an answer when the scratchpad moves on.
_SELF_ASK_RE = re.compile(
    r"""(?P<needed>\bare[ \t]+follow[ \t-]*up[ \t]+questions[ \t]+needed(?:[ \t]+here)?[ \t]*[:?]?)
      |(?P<follow>\bfollow[ \t-]*up(?:[ \t]+question)?[ \t]*:)
      |(?P<inter>\bintermediate[ \t]+answer[ \t]*:)
      |(?P<final>\bso[ \t]+the[ \t]+(?:final[ \t]+)?answer[ \t]+is\b[ \t]*:?
                 |\bthe[ \t]+final[ \t]+answer[ \t]+is[ \t]*:|^[ \t]*final[ \t]+answer[ \t]*:)
      |(?P<question>^[ \t]*question[ \t]*:)""",
    re.IGNORECASE | re.MULTILINE | re.VERBOSE,
)


def _clean(text: str) -> str:
    return text.strip().strip("*_").strip()


def parse_self_ask(text: str) -> FollowUp | SelfAskFinal:
    """Read a Self-Ask turn: the next follow-up question, or the final answer."""
    text = (text or "").replace("\r\n", "\n")
    marks = list(_SELF_ASK_RE.finditer(text))
    ends = [m.start() for m in marks[1:]] + [len(text)]
    parts = [(m.lastgroup, text[m.end() : end]) for m, end in zip(marks, ends, strict=False)]
    kinds = [kind for kind, _ in parts]
    follow = max((i for i, k in enumerate(kinds) if k == "follow"), default=None)
    final = max((i for i, k in enumerate(kinds) if k == "final"), default=None)
    # An "Intermediate answer:" with nothing after it is the stop sequence echoed, not an answer.
    answered = follow is not None and any(
        kind == "inter" and body.strip() for kind, body in parts[follow:]
    )
    if follow is not None and not answered and (final is None or final < follow):
        # The question is its first line: the stop sequence should end the text right after it,
        # and whatever a model adds on later lines is not part of the question.
        lines = [line for line in parts[follow][1].split("\n") if line.strip()]
        question = _clean(lines[0]) if lines else ""
        if not question:
            raise ParseError("The 'Follow up:' line has no question. " + SELF_ASK_FORMAT)
        return FollowUp(question)
    if final is not None:
        answer = _clean(parts[final][1].lstrip(":"))
        if not answer:
            raise ParseError(
                "'So the final answer is:' was followed by no answer. " + SELF_ASK_FORMAT
            )
        return SelfAskFinal(answer)
    if answered:
        raise ParseError(
            "The last follow-up question already has its intermediate answer; ask the next "
            "'Follow up:' question or give 'So the final answer is:'. " + SELF_ASK_FORMAT
        )
    needed = next((body for kind, body in reversed(parts) if kind == "needed"), None)
    if needed is not None and _clean(needed).lower().startswith("no"):
        raise ParseError(
            "You said no follow up questions are needed but gave no final answer line. "
            "Reply with: So the final answer is: <the answer>"
        )
    if needed is not None and _clean(needed).lower().startswith("yes"):
        raise ParseError(
            "You said follow up questions are needed but asked none. " + SELF_ASK_FORMAT
        )
    raise ParseError("Could not find a 'Follow up:' question or a final answer. " + SELF_ASK_FORMAT)


# ------------------------------------------------------------------------------------ scores

_NUM = r"[-+]?\d+(?:\.\d+)?"
# Scale descriptions are not scores: "(0-10)", "[1 to 10]", "on a scale of 1 to 10",
# "from 1 to 10", "between 0 and 1", "a 1-10 scale".
_RANGE_RE = re.compile(
    rf"""\(\s*{_NUM}\s*(?:-|–|to)\s*{_NUM}\s*\)
       |(?<!\[)\[\s*{_NUM}\s*(?:-|–|to)\s*{_NUM}\s*\](?!\])
       |\b(?:scale|range)\s+(?:of\s+|from\s+)?{_NUM}\s*(?:-|–|to)\s*{_NUM}
       |\bfrom\s+{_NUM}\s+to\s+{_NUM}
       |\bbetween\s+{_NUM}\s+and\s+{_NUM}
       |\b{_NUM}\s*(?:-|–|to)\s*{_NUM}[ \t-]*(?:point[ \t]+)?scale""",
    re.IGNORECASE | re.VERBOSE,
)
# Labels whose number is an index, not a score: "Thought 1", "Step 2", "Attempt 3", "#4"...
_INDEX_RE = re.compile(
    r"""(\b(?:thought|step|attempt|action|observation|trial|iteration|round|question|option
        |candidate|solution|answer|example|item|part|turn|node|path|plan|idea|proposal|choice
        |version|draft|response|case|test|problem|reflection|try|level|depth|criterion|point)s?
        [ \t]*\#?[ \t]*|\#[ \t]*)\d+(?:\.\d+)*""",
    re.IGNORECASE | re.VERBOSE,
)
# List numbering at a line start ("1. The answer is..."), also an index.
_LIST_NUMBER_RE = re.compile(r"^([ \t]*)\d{1,3}[.)](?=[ \t]+\S)", re.MULTILINE)
_DEN = r"(?:[ \t]*(?:/|out[ \t]+of\b|\bof\b)[ \t]*(?P<den>\d+(?:\.\d+)?))?(?P<pct>[ \t]*%)?"
# The score forms, most explicit first; each is searched for its LAST occurrence.
_SCORE_RES = (
    re.compile(rf"\[\[\s*(?P<num>{_NUM})\s*(?:/\s*(?P<den>\d+(?:\.\d+)?)\s*)?\]\](?P<pct>)"),
    re.compile(
        rf"\b(?:scor(?:e|ed|ing)|rat(?:e|ed|ing)|grade[ds]?)\b[^\d\n]{{0,30}}?(?P<num>{_NUM}){_DEN}",
        re.IGNORECASE,
    ),
    re.compile(
        rf"(?P<num>{_NUM})[ \t]*(?:/|out[ \t]+of\b)[ \t]*(?P<den>\d+(?:\.\d+)?)(?P<pct>)",
        re.IGNORECASE,
    ),
    re.compile(rf"(?:\*\*|__)\s*(?P<num>{_NUM}){_DEN}\s*(?:\*\*|__)", re.IGNORECASE),
    re.compile(rf"(?<![\w.])(?P<num>{_NUM})(?![\w])(?P<den>)(?P<pct>[ \t]*%)?"),
)


def parse_score(text: str, *, low: float = 0, high: float = 10) -> float:
    """Read an evaluator's score, a float within [low, high].

    "Score: 7/10", "7", "**8**", "rating: 6.5", "I'd give it a 9 out of 10", "[[7]]", "80%".
    """
    if not low < high:
        raise ValueError(f"parse_score needs low < high, got {low} and {high}")
    fmt = f"Reply with a single score from {low:g} to {high:g}, e.g. 'Score: {(low + high) / 2:g}'."
    cleaned = _RANGE_RE.sub(" ", text or "")
    cleaned = _INDEX_RE.sub(lambda m: m.group(1), cleaned)
    cleaned = _LIST_NUMBER_RE.sub(lambda m: m.group(1), cleaned)
    for regex in _SCORE_RES:
        matches = [m for m in regex.finditer(cleaned) if not _zero_den(m.group("den"))]
        if not matches:
            continue
        m = matches[-1]
        value = float(m.group("num"))
        if m.group("den"):
            den = float(m.group("den"))
            value = value if den == high else value / den * high
        elif m.group("pct"):
            value = value if high == 100 else value / 100 * high
        if not math.isfinite(value) or not low <= value <= high:
            shown = m.group("num") + (f"/{m.group('den')}" if m.group("den") else "")
            shown += "%" if m.group("pct") else ""
            if value != float(m.group("num")):  # rescaled: show what it became
                shown += f" (= {value:g})"
            raise ParseError(f"The score {shown} is outside the range {low:g} to {high:g}. " + fmt)
        return value
    raise ParseError("Could not find a score. " + fmt)


def _zero_den(den: str | None) -> bool:
    return bool(den) and float(den) == 0
