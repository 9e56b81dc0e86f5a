"""What a piece of feedback may say, as pure rules (no database): a key's definition, a value
read against it, a note's size, and the runs list's feedback filter.

Every value is stored as Phoenix and LangSmith store theirs: a score (a number) and a label
(a word), either or both. Thumbs are the built-in key "thumbs" (up: score 1, label "up"; down:
0, "down"); a note on its own is the built-in key "note".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

Kind = Literal["numeric", "categories", "boolean"]
KINDS: dict[Kind, str] = {
    "numeric": "a number in a range",
    "categories": "one label of a list",
    "boolean": "yes or no",
}
THUMBS, NOTE = "thumbs", "note"
# A review queue's pairwise choice (agentlab/review/): better / worse / tie, on both runs.
PAIRWISE = "pairwise"
RESERVED = frozenset({THUMBS, NOTE, PAIRWISE})
NAME_CHARS = 64
# A key's name is a word people type in the runs list's filter ("relevance>=4"): no spaces.
NAME_RE = re.compile(r"[a-z0-9][a-z0-9_.-]*")
MAX_LABELS = 50  # categories of one key
BOOLEAN = {"true": ("true", 1.0), "yes": ("true", 1.0), "1": ("true", 1.0),
           "false": ("false", 0.0), "no": ("false", 0.0), "0": ("false", 0.0)}
THUMB_VALUES = {"up": 1.0, "down": 0.0}


class FeedbackError(ValueError):
    """A value, note or definition that is refused; the message says why, to the user."""


@dataclass(frozen=True)
class KeySpec:
    name: str
    kind: Kind
    minimum: float | None = None
    maximum: float | None = None
    labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class Value:
    score: float | None
    label: str = ""


def key_errors(spec: KeySpec, *, label_chars: int) -> dict[str, str]:
    """What is wrong with a key's definition, by field (empty: nothing)."""
    errors: dict[str, str] = {}
    if not NAME_RE.fullmatch(spec.name) or len(spec.name) > NAME_CHARS:
        errors["name"] = (f"Lower-case letters, digits, “_”, “.” and “-”, starting with a letter "
                          f"or digit, at most {NAME_CHARS} characters (it is typed in filters).")
    elif spec.name in RESERVED:
        errors["name"] = f"“{spec.name}” is built in; choose another name."
    if spec.kind not in KINDS:
        errors["kind"] = f"One of {', '.join(KINDS)}."
    if spec.kind == "numeric":
        low, high = spec.minimum, spec.maximum
        if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
            errors["minimum"] = "A numeric key needs a minimum and a maximum."
        elif low >= high:
            errors["maximum"] = "The maximum must be above the minimum."
    if spec.kind == "categories":
        labels = list(spec.labels)
        if len(labels) < 2 or len(labels) > MAX_LABELS:
            errors["labels"] = f"Between 2 and {MAX_LABELS} labels, one per line."
        elif any(not label or label != label.strip() for label in labels):
            errors["labels"] = "A label cannot be blank."
        elif (long := next((x for x in labels if len(x) > label_chars), None)) is not None:
            errors["labels"] = (f"A label is at most {label_chars} characters "
                                f"(“{long[:20]}…” has {len(long)}).")
        elif len(set(labels)) != len(labels):
            errors["labels"] = "Each label once."
    return errors


def read_value(spec: KeySpec, raw: str) -> Value:
    """The value `raw` (as typed or chosen) means for key `spec`, or FeedbackError."""
    text = (raw or "").strip()
    if spec.kind == "numeric":
        try:
            score = float(text)
        except ValueError:
            raise FeedbackError(f"{spec.name}: “{text[:40]}” is not a number.") from None
        low, high = spec.minimum, spec.maximum
        if not math.isfinite(score) or (low is not None and score < low) or (
                high is not None and score > high):
            raise FeedbackError(f"{spec.name}: a number from {_num(low)} to {_num(high)}.")
        return Value(score, "")
    if spec.kind == "categories":
        if text not in spec.labels:
            raise FeedbackError(f"{spec.name}: one of {', '.join(spec.labels)}.")
        return Value(None, text)
    if spec.kind == "boolean":
        if text.lower() not in BOOLEAN:
            raise FeedbackError(f"{spec.name}: yes or no.")
        label, score = BOOLEAN[text.lower()]
        return Value(score, label)
    raise FeedbackError(f"{spec.name}: unknown kind {spec.kind!r}.")


def thumb(raw: str) -> Value:
    if raw not in THUMB_VALUES:
        raise FeedbackError("Thumbs are up or down.")
    return Value(THUMB_VALUES[raw], raw)


def check_note(text: str, *, limit: int) -> str:
    """The note as kept (trimmed), or FeedbackError when it is over `limit` characters."""
    note = (text or "").strip()
    if len(note) > limit:
        raise FeedbackError(f"A note is at most {limit:,} characters (this one has "
                            f"{len(note):,}).")
    return note


def check_label(text: str, *, limit: int) -> str:
    if len(text) > limit:
        raise FeedbackError(f"A label is at most {limit:,} characters (this one has "
                            f"{len(text):,}).")
    return text


def shown(name: str, score: float | None, label: str) -> str:
    """How a value reads on a chip: "thumbs up", "relevance 4", "tone: rude", "correct: yes"."""
    if name == THUMBS:
        return f"thumbs {label}"
    if name == NOTE:
        return "note"
    if label in ("true", "false") and score in (0.0, 1.0):
        return f"{name}: {'yes' if label == 'true' else 'no'}"
    if label:
        return f"{name}: {label}"
    return f"{name} {_num(score)}" if score is not None else name


def _num(value: float | None) -> str:
    if value is None:
        return "?"
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


# -- the runs list's filter --------------------------------------------------------------------

Op = Literal["any", "=", ">=", "<=", ">", "<"]
FILTER_RE = re.compile(r"(?P<name>[a-z0-9][a-z0-9_.-]*)\s*(?:(?P<op>>=|<=|=|>|<)\s*(?P<value>.+))?")
SHORTHANDS = {"any": (None, "any", ""), "up": (THUMBS, "=", "up"), "down": (THUMBS, "=", "down"),
              "note": (NOTE, "any", "")}


@dataclass(frozen=True)
class Filter:
    """Runs with feedback (`name` None: of any key) whose value matches `op` and `value`."""

    name: str | None
    op: Op
    value: str = ""

    @property
    def number(self) -> float | None:
        try:
            number = float(self.value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None


def parse_filter(text: str, known: frozenset[str] | set[str]) -> Filter:
    """`any`, `up`, `down`, `note`, a key's name, or `name=value` / `name>=4` / `name<2`...;
    FeedbackError for anything else (a key nobody defined, a comparison with no number)."""
    text = " ".join((text or "").split())
    if text.lower() in SHORTHANDS:
        name, op, value = SHORTHANDS[text.lower()]
        return Filter(name, op, value)  # type: ignore[arg-type]
    found = FILTER_RE.fullmatch(text)
    if not found:
        raise FeedbackError("any, up, down, note, a key's name, or key=value (e.g. "
                            "relevance>=4, tone=rude).")
    name, op, value = found["name"], found["op"] or "any", (found["value"] or "").strip()
    if name not in known and name not in RESERVED:
        raise FeedbackError(f"No feedback key is named “{name}”.")
    result = Filter(name, op, value)  # type: ignore[arg-type]
    if op in (">=", "<=", ">", "<") and result.number is None:
        raise FeedbackError(f"“{value}” is not a number to compare {name} with.")
    return result
