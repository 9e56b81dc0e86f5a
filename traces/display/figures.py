"""How figures read: sizes, token counts, durations, costs, and which value of a summary
column stands out (compare and experiment tables share it). Pure."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def format_size(chars: int) -> str:
    if chars < 1024:
        return f"{chars} B"
    if chars < 1024 * 1024:
        return f"{chars / 1024:.1f} KB"
    return f"{chars / 1024 / 1024:.1f} MB"


def format_tokens(count: int | None) -> str:
    return f"{count or 0:,}"


def format_duration(ms: float | None) -> str:
    if ms is None:
        return "—"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.2f} s"
    minutes, seconds = divmod(ms / 1000, 60)
    return f"{minutes:.0f} min {seconds:.0f} s"


def format_percent(share: float | None) -> str:
    """A share (0..1) as every page writes one: "67%", whole percents; "<1%" and ">99%"
    where rounding would say none or all of them; "—" for no share at all."""
    if share is None:
        return "—"
    value = share * 100
    if 0 < value < 0.5:
        return "<1%"
    if 99.5 <= value < 100:
        return ">99%"
    return f"{value:.0f}%"


def format_seconds(ms: float | None) -> str:
    """A latency in seconds whatever its size ("0.35 s", "12.40 s", "1,234 s"), so a column
    and its chart read in one unit."""
    if ms is None:
        return "—"
    seconds = ms / 1000
    return f"{seconds:,.2f} s" if seconds < 100 else f"{seconds:,.0f} s"


def format_cost(usd: float | None) -> str:
    if not usd:
        return "$0"
    return f"${usd:.4f}" if usd >= 0.01 else f"${usd:.2g}"


def best_value(values: Iterable[Any], *, higher: bool = False) -> Any | None:
    """The best of the eligible values (lowest, or highest when `higher`), or None when there
    is nothing to rank or every value is the same (then nothing stands out). Ties all win:
    mark every value equal to the result."""
    ranked = list(values)
    distinct = set(ranked)
    if not distinct or (len(distinct) == 1 and len(ranked) > 1):
        return None
    return max(distinct) if higher else min(distinct)
