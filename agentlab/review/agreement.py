"""How far reviewers agree (pure): per item, do they say the same; per queue, the share of
items where they all do, the share of agreeing pairs, Fleiss' kappa (agreement beyond
chance, for any number of reviewers per item), and for numbers the mean distance between two
reviewers' values.

An item counts once at least two reviewers answered it; a value is anything hashable (a
label, a number, "a"/"b"/"tie")."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

Ratings = Sequence[Hashable]  # one item's values, a reviewer each


@dataclass(frozen=True)
class Agreement:
    items: int  # items with two or more values
    agreed: int  # of those, items where every value is the same
    pairs: float | None  # the share of reviewer pairs that agree (Fleiss' P-bar)
    kappa: float | None  # Fleiss' kappa; None where chance alone explains everything
    mean_distance: float | None = None  # numbers only: mean |x - y| over reviewer pairs

    @property
    def percent(self) -> float | None:
        return self.agreed / self.items if self.items else None


def agrees(values: Ratings) -> bool | None:
    """Do all reviewers of one item say the same? None with fewer than two."""
    return len(set(values)) == 1 if len(values) >= 2 else None


def measure(items: Sequence[Ratings]) -> Agreement:
    rated = [list(v) for v in items if len(v) >= 2]
    if not rated:
        return Agreement(0, 0, None, None, None)
    agreed = sum(1 for v in rated if len(set(v)) == 1)
    pair_shares, totals = [], Counter()
    for values in rated:
        counts = Counter(values)
        n = len(values)
        pair_shares.append(sum(c * (c - 1) for c in counts.values()) / (n * (n - 1)))
        totals.update(counts)
    p_bar = sum(pair_shares) / len(pair_shares)
    all_values = sum(totals.values())
    p_e = sum((c / all_values) ** 2 for c in totals.values())
    kappa = None if p_e >= 1 else (p_bar - p_e) / (1 - p_e)
    return Agreement(len(rated), agreed, p_bar, kappa, _distance(rated))


def _distance(rated: Sequence[Sequence[Hashable]]) -> float | None:
    gaps = []
    for values in rated:
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            return None
        gaps += [abs(x - y) for x, y in combinations(values, 2)]  # type: ignore[operator]
    return sum(gaps) / len(gaps) if gaps else None


def by_key(answers: Mapping[int, Mapping[str, Mapping[int, Hashable]]],
           keys: Sequence[str]) -> dict[str, Agreement]:
    """`answers[item][key][reviewer]` -> each key's agreement over the items."""
    return {key: measure([list(per_key.get(key, {}).values()) for per_key in answers.values()])
            for key in keys}
