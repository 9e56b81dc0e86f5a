"""Reflexion helpers: attempts, programmatic checks, reading evaluator and reflector replies."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from agentlab.paradigms import user_regex
from agentlab.paradigms.parsing import ParseError, parse_score, split_think, strip_quotes

SCORE_LOW, SCORE_HIGH = 1, 10
CHECKS = ("contains", "regex")


@dataclass
class Attempt:
    number: int
    answer: str
    finished: bool = True  # False when the actor ran out of iterations or gave no answer
    score: float | None = None  # None: not scored (unreadable score or unfinished attempt)
    passed: bool = False

    def rank(self) -> tuple[float, bool, int]:
        """Sort key of "best": highest score, then finished, then the earlier attempt."""
        return (self.score if self.score is not None else float("-inf"), self.finished,
                -self.number)

    def score_text(self) -> str:
        return "no score" if self.score is None else f"score {self.score:g}/{SCORE_HIGH}"


def best_attempt(attempts: list[Attempt]) -> Attempt | None:
    return max(attempts, key=Attempt.rank, default=None)


def make_check(evaluator: str, expected: str) -> Callable[[str], bool] | None:
    """The programmatic check of `evaluator` ("contains"/"regex"), or None for "llm".

    contains: `expected` appears in the answer, ignoring case and runs of whitespace.
    regex: `expected` (a Python regular expression) matches somewhere in the answer, ignoring
    case, by `user_regex` (length cap; the check raises UnsafePattern when a search runs out
    of time, and blocks until then: call it in a thread). Raises ValueError when `expected`
    is empty, too long or not a valid regular expression.
    """
    if evaluator == "llm":
        return None
    if evaluator not in CHECKS:
        raise ValueError(f"unknown evaluator {evaluator!r}; use llm, contains or regex")
    if not expected.strip():
        raise ValueError(f"the {evaluator!r} evaluator needs the parameter 'expected'")
    if evaluator == "contains":
        needle = _squash(expected)
        return lambda answer: needle in _squash(answer)
    try:
        user_regex.compile_pattern(expected)
    except user_regex.UnsafePattern as exc:
        raise ValueError(f"the regex evaluator's 'expected' is refused: {exc}") from None
    return lambda answer: user_regex.search(expected, answer) is not None


def _squash(text: str) -> str:
    return " ".join(text.casefold().split())


def read_score(text: str) -> tuple[float | None, str]:
    """(score, "") or (None, why it could not be read)."""
    try:
        return parse_score(split_think(text or "")[1], low=SCORE_LOW, high=SCORE_HIGH), ""
    except ParseError as exc:
        return None, str(exc)


_PROBLEMS_RE = re.compile(r"^[ \t*_#-]*problems?[ \t*_]*:[ \t*_]*(?P<body>.*)",
                          re.IGNORECASE | re.MULTILINE | re.DOTALL)
_SCORE_LINE_RE = re.compile(r"^[ \t*_#-]*(?:score|rating)\b.*$", re.IGNORECASE | re.MULTILINE)
_NONE_RE = re.compile(r"^(?:none|no problems?|nothing|n/?a)\W*$", re.IGNORECASE)


def read_problems(text: str) -> str:
    """The problems the evaluator named: after "Problems:", else the reply minus its score."""
    text = split_think(text or "")[1]
    m = _PROBLEMS_RE.search(text)
    body = m.group("body") if m else _SCORE_LINE_RE.sub("", text)
    body = " ".join(body.split()).strip("*_ ")
    return "" if _NONE_RE.match(body) else body


_LESSON_PREFIX_RE = re.compile(r"^[ \t*_#-]*(?:lesson|reflection)[ \t*_]*:[ \t*_]*",
                               re.IGNORECASE)


def read_lesson(text: str) -> str:
    """The reflector's lesson: its first non-empty line, without a "Lesson:" label."""
    for line in split_think(text or "")[1].splitlines():
        lesson = strip_quotes(_LESSON_PREFIX_RE.sub("", line).strip("*_ "))
        if lesson:
            return lesson
    return ""


def evaluation_text(attempt: Attempt, problems: str) -> str:
    return f"{attempt.score_text()}; problems: {problems or 'none named'}"
