"""Is every value of a bundle storable? Depth, numbers, dates (docs/BUNDLE.md "Fields").

Pure: each check returns or raises a message and the place, and traces.bundle turns that into
its BundleError. JSON alone allows what a database, a page or Python's own parser cannot hold:
`1e400` parses as infinity, 100,000 nested arrays exhaust the parser's recursion, a date far
out of range breaks the conversion to UTC.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

MAX_DEPTH = 100  # nesting of objects and arrays, the envelope included
MAX_JSON_INT = 2**63 - 1  # beyond int64 a number is not stored faithfully everywhere
PATH_PARTS = 12  # of a place that is shown; deeper ones end in "…"
# Dates: epoch seconds (steps) and ISO 8601 (the run) between these, inclusive.
EARLIEST, LATEST = datetime(1970, 1, 1, tzinfo=UTC), datetime(9999, 12, 30, tzinfo=UTC)


def bad_value(data: Any) -> tuple[str, str] | None:
    """(where, message) of the first value nested over MAX_DEPTH, not finite, or an integer
    beyond 64 bits; None when there is none."""
    if (found := _bad_value(data, 1)) is None:
        return None
    path, message = found
    path.reverse()
    return where(path[:PATH_PARTS]) + ("…" if len(path) > PATH_PARTS else ""), message


def _bad_value(value: Any, depth: int) -> tuple[list[Any], str] | None:
    # Recursion is bounded by MAX_DEPTH; the path is built on the way back, only on failure.
    kind = type(value)
    if kind is float:
        return None if math.isfinite(value) else ([], f"{value} is not a finite number")
    if kind is int:
        return None if abs(value) <= MAX_JSON_INT else (
            [], "an integer beyond 64 bits is not kept faithfully")
    if kind is dict:
        items: Any = value.items()
    elif kind is list:
        items = enumerate(value)
    else:
        return None
    if depth > MAX_DEPTH:
        return [], f"nested more than {MAX_DEPTH} levels deep"
    for key, item in items:
        if type(item) in (dict, list, float, int) and (
                found := _bad_value(item, depth + 1)) is not None:
            found[0].append(key)
            return found
    return None


def too_deep_at(text: str | bytes) -> str:
    """"line L, column C" where the nesting of JSON text first passes MAX_DEPTH (strings
    skipped); for text too deep for Python's parser to say where."""
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8", "replace")
    depth, in_string, escaped, line, column = 0, False, False, 1, 0
    for char in text:
        column += 1
        if char == "\n":
            line, column = line + 1, 0
        elif in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return f"line {line}, column {column}"
        elif char in "]}":
            depth -= 1
    return ""


def parse_when(text: Any) -> datetime:
    """An ISO 8601 date-time between EARLIEST and LATEST, in UTC; ValueError says why not."""
    if not isinstance(text, str):
        raise ValueError(f"expected an ISO 8601 string, got {type(text).__name__}")
    try:
        when = datetime.fromisoformat(text)
        when = (when if when.tzinfo else when.replace(tzinfo=UTC)).astimezone(UTC)
    except ValueError:
        raise ValueError(f"{text[:100]!r} is not an ISO 8601 date-time") from None
    except OverflowError:  # e.g. 0001-01-01T00:00+05:00: before year 1 in UTC
        when = datetime.min.replace(tzinfo=UTC)
    if not EARLIEST <= when <= LATEST:
        raise ValueError(f"{text!r} is not a date between {EARLIEST:%Y-%m-%d} and "
                         f"{LATEST:%Y-%m-%d}")
    return when


def where(path: Any) -> str:
    """A path as a place: `steps[3].input.messages[0]`."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


MAX_TREE_DEPTH = 1_000  # steps inside steps (settings.AGENTLAB_IMPORT_MAX_DEPTH)


def too_deep_step(parents: dict[int, int | None], limit: int) -> tuple[int, int] | None:
    """(seq, depth) of the first step whose chain of parents is over `limit` steps long, else
    None. Linear: each step's depth is counted once, without recursion; a parent that is not
    a step, or a cycle, ends a chain."""
    depth: dict[int, int] = {}
    for seq in parents:
        chain, seen, node = [], set(), seq
        while node is not None and node in parents and node not in depth and node not in seen:
            seen.add(node)
            chain.append(node)
            node = parents[node]
        level = depth.get(node, -1) if node is not None else -1
        for step in reversed(chain):
            level += 1
            depth[step] = level
            if level > limit:
                return step, level
    return None
