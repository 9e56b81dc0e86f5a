"""Attribute values as the OTLP reader takes them (pure): JSON text parsed where it is JSON,
text cut to what a step holds, numbers that are never negative, infinite or NaN."""

from __future__ import annotations

import json
from typing import Any

MAX_TEXT = 1_000_000


def parsed(value: Any, mime: Any = None) -> Any:
    """`value` parsed when it is JSON text (by its mime type, or because it looks like it)."""
    if not isinstance(value, str):
        return value
    if mime == "application/json" or value[:1] in "{[":
        try:
            return json.loads(value)
        except ValueError:
            return cut(value)
    return cut(value)


def text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def cut(value: str, limit: int = MAX_TEXT) -> str:
    return value if len(value) <= limit else value[:limit]


def json_like(mime: Any, value: str) -> bool:
    return mime == "application/json" or value[:1] in "{["


def count(value: Any) -> int:
    try:
        return max(int(value or 0), 0)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an infinite double
        return 0


def amount(value: Any) -> float:
    try:
        number = float(value or 0)
    except (TypeError, ValueError):
        return 0.0
    return number if number == number and number not in (float("inf"), float("-inf")) else 0.0


def first(*values: Any) -> Any:
    """The first value that is set (not None, not empty)."""
    for v in values:  # a plain loop: called several times for every span read
        if v is not None and not (isinstance(v, str | list | dict) and not v):
            return v
    return None
