"""A regular expression that a user wrote (a regex scorer, Reflexion's `expected`, a guardrail's
deny-list), made safe.

Python's `re` backtracks without limit: `(a+)+$` against 26 characters holds the thread (and
the GIL) for seconds. Such patterns are compiled by the `regex` package instead, whose
`search(..., timeout=)` gives up after MATCH_TIMEOUT_S and which releases the GIL while it
matches (`concurrent=True`), so callers on an event loop run it in a thread
(`asyncio.to_thread`) and the loop stays free. A pattern is also capped in length, and in
how far its counted repeats expand: the `regex` package compiles `a{1000000}` or
`((a{1000}){1000}){1000}` in C, unrolled (seconds and gigabytes, beyond any timeout), so a
pattern whose counts multiply past MAX_REPEAT_EXPANSION is refused before it is compiled.
Case is ignored, as the two users of this module always did.
"""

from __future__ import annotations

import re
import time
from functools import lru_cache

import regex

MAX_PATTERN_CHARS = 1_000  # a longer pattern is refused, not compiled
MAX_REPEAT_EXPANSION = 20_000  # counted repeats, multiplied out (`regex` compiles ~2 µs each)
MATCH_TIMEOUT_S = 1.0  # one search gives up after this (the regex package may overshoot a bit)
PROBE_CHARS = 5_000  # a deny-list pattern is tried on texts this long when it is saved …
PROBE_TIMEOUT_S = 0.25  # … and refused when they take longer than this, all together


class UnsafePattern(ValueError):
    """The pattern is refused (too long, invalid) or its search ran out of time."""


@lru_cache(maxsize=256)
def compile_pattern(pattern: str) -> regex.Pattern[str]:
    """The compiled pattern, case-insensitive; UnsafePattern says why it is refused."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise UnsafePattern(f"the regular expression is {len(pattern):,} characters long; "
                            f"at most {MAX_PATTERN_CHARS:,} are allowed")
    if (size := repeat_expansion(pattern)) > MAX_REPEAT_EXPANSION:
        raise UnsafePattern(f"the regular expression's counted repeats ({{n}}, {{m,n}}) expand "
                            f"to {size:,} items; at most {MAX_REPEAT_EXPANSION:,} are allowed")
    try:
        return regex.compile(pattern, regex.IGNORECASE | regex.VERSION0)
    except (regex.error, OverflowError, RecursionError) as exc:
        raise UnsafePattern(f"invalid regular expression {pattern!r}: {exc}") from None


def search(pattern: str, text: str) -> regex.Match[str] | None:
    """`pattern` searched in `text` within MATCH_TIMEOUT_S, or UnsafePattern."""
    compiled = compile_pattern(pattern)
    try:
        return compiled.search(text, timeout=MATCH_TIMEOUT_S,
                               concurrent=True)
    except TimeoutError:
        raise UnsafePattern(
            f"the regular expression took longer than {MATCH_TIMEOUT_S:g} s on this answer "
            "and was stopped (it backtracks catastrophically; simplify it, e.g. avoid nested "
            "repeats like (a+)+ or (a|aa)+)") from None


_COUNT = re.compile(r"\{(\d*)(?:,(\d*))?\}")


def repeat_expansion(pattern: str) -> int:
    """An upper bound of how many items the pattern's counted repeats unroll to: a sequence
    adds up its items, `x{m,n}` multiplies x by n (by m + 1 when open-ended), a group is its
    whole content (alternatives added, not maxed: a bound, not the exact figure)."""
    stack: list[tuple[int, int]] = []  # the enclosing groups' (total, last item) so far
    total = last = 0
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            total, last, i = total + 1, 1, i + 2
            continue
        if char == "[":  # a character class is one item: skip to its closing bracket
            j = i + 1 + (pattern[i + 1:i + 2] == "^")
            j += pattern[j:j + 1] == "]"
            while j < len(pattern) and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            total, last, i = total + 1, 1, j + 1
            continue
        if char == "(":
            stack.append((total, last))
            total = last = 0
        elif char == ")" and stack:
            inner = max(total, 1)
            total, last = stack.pop()
            total, last = total + inner, inner
        elif char == "{" and (m := _COUNT.match(pattern, i)) and (m[1] or m[2]):
            low = int(m[1] or 0)
            count = int(m[2]) if m[2] else low + 1 if m.group(0).endswith(",}") else low
            total += last * (count - 1)
            last *= count
            i = m.end()
            continue
        elif char not in "|*+?":
            total, last = total + 1, 1
        i += 1
    while stack:  # an unclosed group: compile will refuse it, count it anyway
        inner = max(total, 1)
        total, _ = stack.pop()
        total += inner
    return total


def spans(pattern: str, text: str, timeout: float = MATCH_TIMEOUT_S) -> list[tuple[int, int]]:
    """Every non-empty match of `pattern` in `text`, within `timeout` s, or UnsafePattern."""
    compiled = compile_pattern(pattern)
    try:
        return [m.span() for m in compiled.finditer(text, timeout=timeout,
                                                     concurrent=True) if m.end() > m.start()]
    except TimeoutError:
        raise UnsafePattern(f"the regular expression took longer than {timeout:g} s "
                            "and was stopped (it backtracks catastrophically)") from None


def probes(pattern: str) -> list[str]:
    """Texts that make a backtracking pattern slow: each character the pattern names (and a
    letter, a digit, a space), repeated PROBE_CHARS times, then one that ends no match."""
    named = [c for c in dict.fromkeys(pattern) if c.isalnum() or c in " \t\n-_.,:;@/"]
    chars = list(dict.fromkeys(["a", "0", " ", *named]))[:24]
    texts = [c * PROBE_CHARS + "\x00" for c in chars]
    texts.append(("".join(chars) * (PROBE_CHARS // len(chars) + 1))[:PROBE_CHARS] + "\x00")
    return texts


def check_speed(pattern: str) -> None:
    """UnsafePattern when `pattern` (compiled first) takes over PROBE_TIMEOUT_S on its probe
    texts together: a deny-list pattern runs on every message of every run, so one that
    backtracks catastrophically is refused when it is saved, not met at run time."""
    compiled = compile_pattern(pattern)
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    for text in probes(pattern):
        left = deadline - time.monotonic()
        try:
            if left <= 0:
                raise TimeoutError
            for _ in compiled.finditer(text, timeout=left, concurrent=True):
                pass
        except TimeoutError:
            raise UnsafePattern(
                f"the regular expression is too slow: on a probe text of {len(text):,} "
                f"characters ({text[:3]!r}…) it took longer than {PROBE_TIMEOUT_S:g} s; it "
                "backtracks catastrophically (avoid nested repeats like (a+)+ or (a|aa)+)"
            ) from None
