"""Pages of a long diff (pure: no Django): what one page of rows shows, and what changed
inside each subtree.

A diff of two 100k-step runs is 100k rows; a page shows PAGE_ROWS items from a position
(`at`, a row index the URL names), by default a few rows above the first divergence. A row
whose step has steps inside it (a plan step, a member's turn, a LATS node) heads a subtree:
it gets a one-line summary of the rows inside ("12 steps equal", "3 changed, 1 added"), and
when it and everything inside are equal the whole subtree is one folded item. Long stretches
of equal rows fold to their ends. A folded item is opened one level at a time (`flat`): its
rows, with the equal subtrees inside still folded.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from traces.diff import DiffRow

PAGE_ROWS = 200  # items (rows and folds) on one page or one "more"
BEFORE = 4  # rows shown above the first divergence
FOLD_EQUAL = 6  # a stretch of more equal rows than this folds to its two ends
ItemKind = Literal["row", "fold"]
OPS = ("changed", "inserted", "deleted")
WORDS = {"changed": "changed", "inserted": "added", "deleted": "removed"}


@dataclass(slots=True)
class Item:
    kind: ItemKind
    index: int  # the row (kind "row"), or the first row folded (kind "fold")
    row: DiffRow | None = None  # the row, or the head of a folded subtree
    stop: int = 0  # a fold: the row after its last
    summary: str = ""  # a subtree's one line (a row that heads one, or a folded subtree)

    @property
    def inner(self) -> int:
        """A fold's first row to show when opened (a folded subtree's head is its summary)."""
        return self.index + 1 if self.row is not None else self.index

    @property
    def folded(self) -> int:
        return self.stop - self.inner


@dataclass(slots=True)
class Page:
    items: list[Item]
    at: int  # the first row this page shows
    next: int | None  # where "more" starts; None at the end (or at `stop`)
    left: int  # rows after this page (up to `stop`)


class Subtrees:
    """Which rows head a subtree, where it ends, and what changed inside: linear in the rows
    (one pass with a stack of open subtrees; the rows that differ, by op, for counting)."""

    def __init__(self, rows: Sequence[DiffRow]) -> None:
        self.ends: dict[int, int] = {}
        stack: list[tuple[int, int | None, int | None]] = []  # (row, left seq, right seq)
        for i, row in enumerate(rows):
            left, right = row.left, row.right
            up_left = left.parent if left is not None else None
            up_right = right.parent if right is not None else None
            while stack:
                head, seq_left, seq_right = stack[-1]
                if ((up_left is not None and up_left == seq_left)
                        or (up_right is not None and up_right == seq_right)):
                    break
                stack.pop()
                if i > head + 1:
                    self.ends[head] = i
            stack.append((i, left.seq if left is not None else None,
                          right.seq if right is not None else None))
        for head, _, _ in stack:
            if len(rows) > head + 1:
                self.ends[head] = len(rows)
        self.differ: dict[str, list[int]] = {op: [] for op in OPS}
        for i, row in enumerate(rows):
            if row.op != "equal":
                self.differ[row.op].append(i)

    def counts(self, lo: int, hi: int) -> dict[str, int]:
        return {op: bisect_left(at, hi) - bisect_left(at, lo) for op, at in self.differ.items()}

    def all_equal(self, head: int) -> bool:
        end = self.ends[head]
        return not any(self.counts(head + 1, end).values())

    def summary(self, head: int) -> str:
        return summary_line(self.ends[head] - head - 1, self.counts(head + 1, self.ends[head]))


def summary_line(inside: int, counts: dict[str, int]) -> str:
    """"12 steps equal" or "3 changed, 1 added, 8 equal" (rows inside a subtree)."""
    differ = [f"{counts[op]:,} {WORDS[op]}" for op in OPS if counts[op]]
    equal = inside - sum(counts.values())
    if not differ:
        return f"{inside:,} step{'s' if inside != 1 else ''} inside, all equal"
    return ", ".join(differ + ([f"{equal:,} equal"] if equal else []))


def start_of(first: int | None) -> int:
    """Where the diff page opens: a few rows above the first divergence."""
    return 0 if first is None else max(0, first - BEFORE)


def page(rows: Sequence[DiffRow], subtrees: Subtrees, at: int, *, stop: int | None = None,
         flat: bool = False, size: int = PAGE_ROWS) -> Page:
    """The items from row `at` (up to `stop`): at most `size` of them. Equal subtrees are
    folded; long equal stretches too, unless `flat` (a fold being opened shows its rows)."""
    stop = len(rows) if stop is None else min(stop, len(rows))
    at = max(0, min(at, stop))
    items: list[Item] = []
    i = at
    while i < stop and len(items) < size:
        row, end = rows[i], subtrees.ends.get(i)
        if end is not None and row.op == "equal" and subtrees.all_equal(i):
            items.append(Item("fold", i, row, min(end, stop), subtrees.summary(i)))
            i = end
            continue
        if row.op == "equal" and not flat:
            j = i
            while j < stop and rows[j].op == "equal" and not (
                    j in subtrees.ends and subtrees.all_equal(j)):
                j += 1
            if j - i > FOLD_EQUAL:
                items += [Item("row", k, rows[k]) for k in (i, i + 1)]
                items.append(Item("fold", i + 2, None, j - 2))
                items += [Item("row", k, rows[k]) for k in (j - 2, j - 1)]
                i = j
                continue
        items.append(Item("row", i, row, summary=subtrees.summary(i) if end else ""))
        i += 1
    return Page(items, at, i if i < stop else None, stop - i)
