"""Which value of a summary column stands out (pure): compare and experiment tables share it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def best_value(values: Iterable[Any], *, higher: bool = False) -> Any | None:
    """The best of the eligible values (lowest, or highest when `higher`), or None when there
    is nothing to rank or every value is the same (then nothing stands out). Ties all win:
    mark every value equal to the result."""
    ranked = list(values)
    distinct = set(ranked)
    if not distinct or (len(distinct) == 1 and len(ranked) > 1):
        return None
    return max(distinct) if higher else min(distinct)
