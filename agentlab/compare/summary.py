"""The summary table of a comparison, best of each numeric column marked (pure: no ORM).

Works on anything with a Run's attributes (a Run row, or a plain object in tests). "Best" is the
lowest value among the runs that succeeded: a run that failed after one step is not the cheapest.
Ties are all marked; a column where every candidate has the same value marks none, since nothing
stands out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from traces.display.figures import best_value, format_cost, format_duration
from traces.schema import FINISHED_STATUSES


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    value: Callable[[Any], float | None]
    display: Callable[[float], str]


def _int(v: float) -> str:
    return f"{int(v):,}"


def _cost(v: float) -> str:
    return format_cost(v)  # as every page writes a cost


def _wall(v: float) -> str:
    return format_duration(v)


NUMERIC: tuple[Column, ...] = (
    Column("steps", "Steps", lambda r: r.step_count, _int),
    Column("llm_calls", "LLM calls", lambda r: r.llm_calls, _int),
    Column("tool_calls", "Tool calls", lambda r: r.tool_calls, _int),
    Column("tokens", "Tokens", lambda r: (r.tokens_in or 0) + (r.tokens_out or 0), _int),
    Column("cost_usd", "Cost", lambda r: r.cost_usd, _cost),
    Column("wall_ms", "Wall time", lambda r: r.wall_ms, _wall),
)


@dataclass
class Cell:
    key: str
    value: float | None
    text: str
    best: bool = False


@dataclass
class Row:
    label: str
    run: Any
    answer: str
    status: str
    cells: list[Cell] = field(default_factory=list)


@dataclass
class Summary:
    columns: tuple[Column, ...]
    rows: list[Row]

    def chart_data(self) -> dict[str, list]:
        """What the cost/time chart plots, one bar pair per agent."""
        by_key = {c.key: i for i, c in enumerate(self.columns)}
        return {
            "labels": [r.label for r in self.rows],
            "cost_usd": [r.cells[by_key["cost_usd"]].value or 0 for r in self.rows],
            "wall_s": [round((r.cells[by_key["wall_ms"]].value or 0) / 1000, 3) for r in self.rows],
        }


def all_finished(runs: Sequence[Any]) -> bool:
    return bool(runs) and all(r.status in FINISHED_STATUSES for r in runs)


def summarize(runs: Sequence[Any], labels: Sequence[str] | None = None) -> Summary:
    """One row per run (in order), each numeric cell marked `best` where it is the lowest."""
    labels = list(labels) if labels is not None else [r.agent_name for r in runs]
    rows = []
    for run, label in zip(runs, labels, strict=True):
        cells = []
        for col in NUMERIC:
            v = col.value(run)
            cells.append(Cell(col.key, v, "—" if v is None else col.display(v)))
        rows.append(Row(label, run, run.final_answer or run.error or "", run.status, cells))
    for i, _col in enumerate(NUMERIC):
        ranked = [r.cells[i] for r in rows if r.status == "succeeded" and r.cells[i].value
                  is not None]
        low = best_value(c.value for c in ranked)
        for c in ranked:
            c.best = low is not None and c.value == low
    return Summary(NUMERIC, rows)


def pairs(items: Sequence[Any]) -> list[tuple[Any, Any]]:
    """Every unordered pair, in order: (a, b), (a, c), (b, c)…"""
    return [(a, b) for i, a in enumerate(items) for b in items[i + 1:]]
