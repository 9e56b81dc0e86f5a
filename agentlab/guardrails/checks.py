"""Checks: what a guardrail looks for, what it does when it finds it, and the scrubbing of any
JSON value (a step's input, output, text, meta) with a run's checks (pure).

A span check (a detector or a user's deny-list pattern) is applied to every string of a value,
so a secret is redacted wherever it appears (a tool's output, the prompt that quotes it, a
step's meta). `flag` and `max_length` act only on a step's subject (its text and output: the
model's reply, the tool's observation, the question): elsewhere the same text would be flagged
again in every prompt that repeats it. A `block` check masks what it found wherever it is; the
caller stops the run when it found something in a subject (GuardrailBlocked).

A user's deny-list pattern has one time budget per check for a whole value (`Budget`:
MATCH_TIMEOUT_S in all, not per string): once it is spent, the strings left are treated as
matches (fail closed) without running the pattern again. A `Memo` remembers what each string
gave, so a string scanned once (a message every later prompt repeats) is not scanned again.
The runtime runs these scans off the event loop (agentlab.runtime.guard)."""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from agentlab.guardrails import detectors, user_regex
from agentlab.guardrails.detectors import Span

Stage = Literal["input", "output"]
CheckKind = Literal["pii", "email", "phone", "card", "iban", "api_key", "regex", "max_length",
                    "judge"]
Action = Literal["block", "redact", "flag"]
CHECK_KINDS: tuple[str, ...] = get_args(CheckKind)
ACTIONS: tuple[str, ...] = get_args(Action)
STAGES: tuple[str, ...] = get_args(Stage)
SPAN_KINDS = ("pii", *detectors.DETECTORS, "regex")
DEFAULT_MESSAGE = "This was blocked by a guardrail."
MAX_VALUE_DEPTH = 40  # deeper JSON is left as it is (steps are never this deep)


def marker(label: str) -> str:
    """What replaces a redacted span."""
    return f"[redacted: {label}]"


class GuardrailBlocked(Exception):  # noqa: N818  (a decision, not an error of ours)
    """A `block` guardrail stopped the run; `message` is what the user is shown."""

    def __init__(self, guardrail: str, message: str) -> None:
        super().__init__(message)
        self.guardrail = guardrail
        self.message = message


@dataclass(frozen=True)
class Check:
    name: str
    stage: Stage
    kind: CheckKind
    action: Action
    pattern: str = ""  # regex: the deny-list pattern; judge: the policy the judge applies
    limit: int | None = None  # max_length: the most characters
    message: str = ""  # block: what the user is shown
    judge: dict[str, Any] | None = None  # judge: its model profile (ProfileConfig as JSON)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Check:
        known = set(cls.__dataclass_fields__)
        check = cls(**{k: v for k, v in data.items() if k in known})
        if check.kind not in CHECK_KINDS or check.action not in ACTIONS \
                or check.stage not in STAGES:
            raise ValueError(f"guardrail {check.name!r}: unknown kind, action or stage")
        return check

    @property
    def block_message(self) -> str:
        return self.message or DEFAULT_MESSAGE


@dataclass(frozen=True)
class Hit:
    """One finding: which check, where (a path into the value, offsets into that string),
    what kind of thing. `found` is the original text, kept in memory only (to tell the same
    value seen again); `as_dict` leaves it out, so it never reaches a trace."""

    check: Check
    path: str
    start: int
    end: int
    label: str
    found: str = field(default="", repr=False, compare=False)

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "start": self.start, "end": self.end, "label": self.label}


class Budget:
    """The time each user-written pattern may still spend on one value (seconds, by check)."""

    def __init__(self, seconds: float = user_regex.MATCH_TIMEOUT_S) -> None:
        self.seconds = seconds
        self.spent: dict[str, float] = {}

    def left(self, check: Check) -> float:
        return self.seconds - self.spent.get(check.name, 0.0)

    def spend(self, check: Check, seconds: float) -> None:
        self.spent[check.name] = self.spent.get(check.name, 0.0) + seconds


class Memo:
    """What `scan_text` gave for each string already scanned (by a digest of the string and
    whether it was a subject; the `MAX` most recent)."""

    MAX = 20_000

    def __init__(self) -> None:
        self._seen: OrderedDict[bytes, tuple[str | None, list[tuple[Any, ...]]]] = OrderedDict()

    @staticmethod
    def key(text: str, subject: bool) -> bytes:
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16)
        return digest.digest() + (b"s" if subject else b"o")

    def get(self, key: bytes) -> tuple[str | None, list[tuple[Any, ...]]] | None:
        found = self._seen.get(key)
        if found is not None:
            self._seen.move_to_end(key)
        return found

    def put(self, key: bytes, value: tuple[str | None, list[tuple[Any, ...]]]) -> None:
        self._seen[key] = value
        if len(self._seen) > self.MAX:
            self._seen.popitem(last=False)


def spans(check: Check, text: str, *, subject: bool = True,
          budget: Budget | None = None) -> list[Span]:
    """What `check` finds in one string (judges find nothing here: agentlab.guardrails.judge).
    A deny-list pattern spends from `budget` (a fresh one: MATCH_TIMEOUT_S)."""
    if check.kind == "pii":
        return detectors.pii(text)
    if check.kind in detectors.DETECTORS:
        return detectors.DETECTORS[check.kind](text)
    if check.kind == "regex":
        budget = budget or Budget()
        left = budget.left(check)
        started = time.monotonic()
        try:
            if left <= 0:  # its time for this value is spent: not run again
                raise user_regex.UnsafePattern("out of time")
            return [Span(a, b, "deny") for a, b in user_regex.spans(check.pattern, text,
                                                                    timeout=left)]
        except user_regex.UnsafePattern:  # fail closed: the whole string is suspect
            return [Span(0, len(text), "deny")] if text else []
        finally:
            budget.spend(check, time.monotonic() - started)
    if check.kind == "max_length" and subject and check.limit is not None \
            and len(text) > check.limit:
        return [Span(check.limit, len(text), "length")]
    return []


def scan_text(text: str, checks: Sequence[Check], *, subject: bool, path: str = "",
              budget: Budget | None = None, memo: Memo | None = None) -> tuple[str, list[Hit]]:
    """`text` with what redact and block checks found replaced by markers, and every hit
    (offsets into the original `text`). With a `memo`, a string scanned before is not again."""
    if memo is None or not text:
        return _scan_text(text, checks, subject=subject, path=path, budget=budget or Budget())
    key = memo.key(text, subject)
    if (seen := memo.get(key)) is not None:
        masked, found = seen
        by_name = {c.name: c for c in checks}
        return (text if masked is None else masked), [
            Hit(by_name[name], path, start, end, label, text[start:end])
            for name, start, end, label in found if name in by_name]
    masked, hits = _scan_text(text, checks, subject=subject, path=path,
                              budget=budget or Budget())
    memo.put(key, (None if masked is text else masked,
                   [(h.check.name, h.start, h.end, h.label) for h in hits]))
    return masked, hits


def _scan_text(text: str, checks: Sequence[Check], *, subject: bool, path: str,
               budget: Budget) -> tuple[str, list[Hit]]:
    hits: list[Hit] = []
    for check in checks:
        if check.action == "flag" and not subject:
            continue
        for span in spans(check, text, subject=subject, budget=budget):
            hits.append(Hit(check, path, span.start, span.end, span.label,
                            text[span.start:span.end]))
    masked = sorted((h for h in hits if h.check.action != "flag"),
                    key=lambda h: (h.start, -h.end))
    if not masked:
        return text, hits
    out, at = [], 0
    for hit in masked:
        if hit.start < at:  # overlaps a span already replaced: widen it
            at = max(at, hit.end)
            continue
        out += [text[at:hit.start], marker(hit.label)]
        at = hit.end
    out.append(text[at:])
    return "".join(out), hits


def scrub(value: Any, checks: Sequence[Check], *, subject: bool, path: str = "",
          budget: Budget | None = None, memo: Memo | None = None,
          _depth: int = 0) -> tuple[Any, list[Hit]]:
    """`value` (any JSON) with every string scanned (`scan_text`); a new value where anything
    was replaced, the same object where nothing was. One `budget` for the whole value."""
    budget = budget or Budget()
    if isinstance(value, str):
        return scan_text(value, checks, subject=subject, path=path, budget=budget, memo=memo)
    if _depth > MAX_VALUE_DEPTH:
        return value, []
    hits: list[Hit] = []
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            out[key], found = scrub(item, checks, subject=subject,
                                    path=f"{path}.{key}" if path else str(key),
                                    budget=budget, memo=memo, _depth=_depth + 1)
            hits += found
        changed = any(out[k] is not value[k] for k in value)
        return (out if changed else value), hits
    if isinstance(value, list | tuple):
        items = []
        for i, item in enumerate(value):
            new, found = scrub(item, checks, subject=subject, path=f"{path}[{i}]",
                               budget=budget, memo=memo, _depth=_depth + 1)
            items.append(new)
            hits += found
        changed = any(a is not b for a, b in zip(items, value, strict=True))
        return (items if changed else value), hits
    return value, []
