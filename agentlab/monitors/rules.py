"""The live scorers' rules as pure functions (no database): which runs are sampled, what one
judge call may cost at most, a rolling average, and when an alert's episode opens or closes."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

Op = Literal["below", "above"]
Change = Literal["open", "close", None]
CHARS_PER_TOKEN = 3  # a prompt's tokens counted high: English runs ~4 characters a token


def sampled(scorer_id: int, run_id: int, rate: float) -> bool:
    """Whether the scorer scores this run: the same answer in every process and every pass
    (a hash of both ids, not a random draw), and about `rate` of the runs."""
    if rate >= 1:
        return True
    if rate <= 0:
        return False
    digest = hashlib.sha256(f"{scorer_id}:{run_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < rate


def most_a_call_costs(prompt_chars: int, max_tokens: int, price_in_per_m: float,
                      price_out_per_m: float) -> float:
    """USD one judge call can cost at most: its prompt counted high, its reply at max_tokens."""
    tokens_in = math.ceil(prompt_chars / CHARS_PER_TOKEN)
    return (tokens_in * price_in_per_m + max_tokens * price_out_per_m) / 1_000_000


def mean(values: Iterable[float]) -> float | None:
    found = list(values)
    return sum(found) / len(found) if found else None


def rolling(values: Sequence[float], window: int) -> list[float]:
    """At each point, the mean of the last `window` values up to it (fewer at the start)."""
    out, total = [], 0.0
    for i, value in enumerate(values):
        total += value
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def breached(value: float | None, op: Op, threshold: float) -> bool | None:
    """Whether `value` is past the threshold (None: nothing to judge yet)."""
    if value is None:
        return None
    return value < threshold if op == "below" else value > threshold


@dataclass(frozen=True)
class Episode:
    """What the threshold says now, given whether an alert is open: open one, close it, or
    nothing (an open alert stays open while the threshold stays crossed: one alert, one
    e-mail an episode)."""

    is_open: bool

    def change(self, now_breached: bool | None) -> Change:
        if now_breached is None:
            return None
        if now_breached and not self.is_open:
            return "open"
        if not now_breached and self.is_open:
            return "close"
        return None
