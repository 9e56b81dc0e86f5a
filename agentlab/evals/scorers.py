"""Scorers: an agent's answer vs a case's expectation -> Score(score 0..1, passed, detail).

Pure (no Django). `score_answer` covers the deterministic scorers; `judge` asks a ChatModel.
`json_schema`: the answer's JSON (the text, a fenced block or its first object) against a JSON
schema given as the expected value (checked by `read_schema`: no `pattern`, whose Python
regular expressions have no time limit).
A scorer that cannot score (an invalid, too long or too slow regex — see
agentlab.paradigms.user_regex —, an expected value that is not a number, a judge reply without a
score) raises ScorerError: the result is an *error*, never a silent 0.

Normalisation (exact, contains): Unicode NFKC, accents folded ("Zürich" = "Zurich"), case
folded, the articles "a", "an", "the" dropped as whole words, whitespace collapsed, and
punctuation stripped at the two ends only (so "Harrow & Finch." = "harrow & finch", while
"1,234.5" keeps its inner comma and point).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import unicodedata
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import jsonschema

from agentlab.llm.types import ChatModel
from agentlab.paradigms import user_regex
from agentlab.paradigms.parsing import ParseError, iter_json_objects, parse_score, split_think
from agentlab.paradigms.prompt_files import fill

SCORERS = ("exact", "contains", "numeric", "regex", "json_schema", "llm_judge")
MAX_SCHEMA_CHARS = 20_000  # a JSON schema longer than this is refused
# Keywords whose value jsonschema hands to Python's `re`, which backtracks without limit: a
# pattern belongs to the regex scorer (capped and timed, agentlab.guardrails.user_regex).
UNSAFE_SCHEMA_KEYWORDS = frozenset({"pattern", "patternProperties", "$dynamicRef"})
JUDGE_PASS_SCORE = 6  # a judge reply without "passed": passed when score >= this (of 10)
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_FENCE = re.compile(r"```[a-zA-Z]*\s*\n?(.*?)\n?\s*```", re.DOTALL)
_END_PUNCT = " \t\n\"'`*_.,;:!?()[]{}<>«»“”‘’"
# A number: optional sign (not after a letter/digit, so "2026-06-30" has no negatives),
# thousands separators "1,234,567.5", decimals, an exponent. Unicode minus allowed.
_NUMBER = re.compile(
    r"(?<![\w.,])(?P<sign>[-−+]?)(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?P<exp>[eE][-+]?\d+)?(?![\d])"
)


class ScorerError(ValueError):
    """The answer could not be scored; the message says why (shown on the result)."""


@dataclass(frozen=True)
class Score:
    score: float  # 0..1
    passed: bool
    detail: dict[str, Any] = field(default_factory=dict)


def normalise(text: str) -> str:
    folded = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text or "").casefold())
    folded = "".join(c for c in folded if not unicodedata.combining(c))
    words = _ARTICLES.sub(" ", folded)
    return " ".join(words.split()).strip(_END_PUNCT)


def exact(answer: str, expected: str) -> Score:
    got, want = normalise(answer), normalise(expected)
    ok = got == want
    return Score(float(ok), ok, {"scorer": "exact", "answer": got, "expected": want})


def contains(answer: str, expected: str) -> Score:
    """The normalised expected text occurs in the normalised answer, not inside a longer word
    ("Lisk" is not found in "Liskov")."""
    got, want = normalise(answer), normalise(expected)
    if not want:
        raise ScorerError("contains: the expected text is empty")
    ok = re.search(rf"(?<!\w){re.escape(want)}(?!\w)", got) is not None
    return Score(float(ok), ok, {"scorer": "contains", "expected": want,
                                 "answer": _clip(got)})


def numbers(text: str) -> list[float]:
    """Every number in `text`: "1,234.5" -> 1234.5, "-3" -> -3, "5 cents" -> 5, "1e3" -> 1000."""
    found = []
    for m in _NUMBER.finditer(text or ""):
        sign = "-" if m["sign"] in ("-", "−") else ""
        value = float(sign + m["num"].replace(",", "") + (m["exp"] or ""))
        if math.isfinite(value):
            found.append(value)
    return found


def numeric(answer: str, expected: str, tolerance: float | None = None) -> Score:
    """The LAST number in the answer (where a final answer usually ends) must be within
    `tolerance` (absolute; default exact, up to float rounding) of the expected number."""
    want = numbers(str(expected))
    if len(want) != 1:
        raise ScorerError(f"numeric: the expected value {expected!r} is not one number")
    tol = 0.0 if tolerance is None else float(tolerance)
    if not math.isfinite(tol) or tol < 0:
        raise ScorerError(f"numeric: the tolerance must be a number >= 0, got {tolerance!r}")
    found = numbers(answer)
    detail: dict[str, Any] = {"scorer": "numeric", "expected": want[0], "tolerance": tol,
                              "numbers": found[:20], "used": found[-1] if found else None}
    if not found:
        return Score(0.0, False, {**detail, "reason": "the answer contains no number"})
    ok = abs(found[-1] - want[0]) <= tol + 1e-9 * max(1.0, abs(want[0]))
    return Score(float(ok), ok, detail)


def regex(answer: str, pattern: str) -> Score:
    """A case-insensitive search of `pattern` in the answer, by `user_regex`: a pattern over
    its length cap or a search over its time limit is a ScorerError. It blocks for up to that
    limit: async callers run it in a thread (`ascore_answer`)."""
    try:
        m = user_regex.search(pattern, answer or "")
    except user_regex.UnsafePattern as exc:
        raise ScorerError(f"regex: {exc}") from None
    return Score(float(m is not None), m is not None,
                 {"scorer": "regex", "pattern": pattern, "match": m.group(0) if m else None})


def read_schema(text: str) -> dict[str, Any]:
    """The JSON schema written as `text`, checked (ScorerError says what is wrong): a JSON
    object, at most MAX_SCHEMA_CHARS, valid for its draft, without `pattern` keywords."""
    if len(text or "") > MAX_SCHEMA_CHARS:
        raise ScorerError(f"json_schema: the schema is {len(text):,} characters long; at most "
                          f"{MAX_SCHEMA_CHARS:,} are allowed")
    try:
        schema = json.loads(text or "")
    except (ValueError, RecursionError) as exc:
        raise ScorerError(f"json_schema: the schema is not JSON ({exc})") from None
    if not isinstance(schema, dict):
        raise ScorerError("json_schema: the schema must be a JSON object")
    if found := _keywords(schema) & UNSAFE_SCHEMA_KEYWORDS:
        raise ScorerError(f"json_schema: {', '.join(sorted(found))} is not allowed here (Python's "
                          "regular expressions have no time limit): use the regex scorer")
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ScorerError(f"json_schema: invalid schema: {exc.message}") from None
    return schema


def _keywords(value: Any, depth: int = 0) -> set[str]:
    if depth > 100:
        raise ScorerError("json_schema: the schema is nested too deep")
    if isinstance(value, dict):
        found = set(value)
        for v in value.values():
            found |= _keywords(v, depth + 1)
        return found
    if isinstance(value, list):
        return set().union(*(_keywords(v, depth + 1) for v in value)) if value else set()
    return set()


def read_json_answer(answer: str) -> Any:
    """The JSON value of an answer: the whole text, a fenced block, else its first {…}."""
    text = (answer or "").strip()
    if fenced := _FENCE.fullmatch(text):
        text = fenced.group(1).strip()
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    for _start, _end, obj in iter_json_objects(text):
        return obj
    raise ScorerError("json_schema: the answer is not JSON" + (
        f": {_clip(answer, 200)!r}" if text else " (it is empty)"))


def json_schema(answer: str, schema_text: str) -> Score:
    """The answer (its JSON: the text, a fenced block or its first object) is valid against
    the schema; the first problem found is named."""
    schema = read_schema(schema_text)
    try:
        value = read_json_answer(answer)
    except ScorerError as exc:
        return Score(0.0, False, {"scorer": "json_schema", "reason": str(exc)})
    try:
        error = jsonschema.exceptions.best_match(
            jsonschema.validators.validator_for(schema)(schema).iter_errors(value))
    except RecursionError:
        raise ScorerError("json_schema: the answer is nested too deep to check") from None
    detail: dict[str, Any] = {"scorer": "json_schema"}
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "the answer"
        detail["reason"] = _clip(f"{where}: {error.message}", 500)
    return Score(float(error is None), error is None, detail)


def score_answer(scorer: str, answer: str, expected: str, tolerance: float | None = None
                 ) -> Score:
    """One of the deterministic scorers (the judge is async: see `judge`)."""
    if scorer == "exact":
        return exact(answer, expected)
    if scorer == "contains":
        return contains(answer, expected)
    if scorer == "numeric":
        return numeric(answer, expected, tolerance)
    if scorer == "regex":
        return regex(answer, expected)
    if scorer == "json_schema":
        return json_schema(answer, expected)
    if scorer == "llm_judge":
        raise ScorerError("llm_judge is asynchronous: call judge() with a model")
    raise ScorerError(f"unknown scorer {scorer!r}; scorers: {', '.join(SCORERS)}")


async def ascore_answer(scorer: str, answer: str, expected: str,
                        tolerance: float | None = None) -> Score:
    """`score_answer` in a thread, so a slow regex never holds the event loop."""
    return await asyncio.to_thread(score_answer, scorer, answer, expected, tolerance)


# -- the LLM judge -----------------------------------------------------------------------------

def judge_messages(question: str, expected: str, rubric: str, answer: str) -> list[dict]:
    text = resources.files("agentlab.evals").joinpath("prompts", "judge.txt")
    prompt = fill(text.read_text(encoding="utf-8"), question=question,
                  expected=expected or "(none)", rubric=rubric or "(none: compare with the "
                  "reference answer)", answer=answer or "(empty)")
    return [{"role": "user", "content": prompt}]


def parse_judge_reply(text: str) -> tuple[float, bool, str]:
    """(score 0..10, passed, reasoning) from the judge's reply: its JSON object if there is one
    (also inside prose or a code fence), else a score written out ("Score: 7/10")."""
    _think, body = split_think(text or "")
    for _start, _end, obj in iter_json_objects(body):
        if "score" not in obj:
            continue
        try:
            value = float(obj["score"])
        except (TypeError, ValueError):
            raise ScorerError(f"judge: the score {obj['score']!r} is not a number") from None
        if not 0 <= value <= 10:
            raise ScorerError(f"judge: the score {value:g} is outside 0 to 10")
        passed = obj.get("passed")
        if isinstance(passed, str):
            passed = passed.strip().lower() in ("true", "yes", "pass", "passed")
        if not isinstance(passed, bool):
            passed = value >= JUDGE_PASS_SCORE
        return value, passed, str(obj.get("reasoning") or obj.get("reason") or "")
    try:
        value = parse_score(body)
    except ParseError as exc:
        raise ScorerError(f"judge: unreadable reply ({exc}) — reply was {_clip(text, 200)!r}"
                          ) from None
    return value, value >= JUDGE_PASS_SCORE, body.strip()


async def judge(model: ChatModel, *, question: str, expected: str, rubric: str,
                answer: str) -> Score:
    """Ask `model` to grade the answer; the reasoning, reply and usage go into the detail."""
    result = await model.chat(judge_messages(question, expected, rubric, answer),
                              response_format={"type": "json_object"}, temperature=0)
    detail: dict[str, Any] = {"scorer": "llm_judge", "profile": result.profile,
                              "reply": result.text, "tokens_in": result.usage.prompt_tokens,
                              "tokens_out": result.usage.completion_tokens,
                              "cost_usd": result.cost_usd}
    try:
        value, passed, reasoning = parse_judge_reply(result.text)
    except ScorerError as exc:
        raise JudgeReplyError(str(exc), detail) from None
    return Score(value / 10, passed, {**detail, "score_10": value, "reasoning": reasoning})


class JudgeReplyError(ScorerError):
    """An unreadable judge reply; `detail` keeps what the judge said."""

    def __init__(self, message: str, detail: dict[str, Any]) -> None:
        super().__init__(message)
        self.detail = detail


def _clip(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"

