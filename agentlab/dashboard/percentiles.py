"""Percentiles in the database, on SQLite too (which has no percentile function).

Nearest-rank definition: the p-th percentile of n sorted values is the value at rank
ceil(p/100 · n), an observed value. CUME_DIST() over a group ordered by the value gives every
row (rows with a value ≤ its own) / n, so that value is the smallest one whose CUME_DIST is
≥ p/100 (ties included: equal values share one CUME_DIST). One window per column (one sort),
then an outer GROUP BY picks MIN(CASE WHEN cume_dist ≥ p/100 THEN value END) for every p at
once, with COUNT and SUM alongside: one statement for all the percentiles of a table, one row
per group. The inner query is the ORM's (filters, joins, annotations); only the outer
SELECT … GROUP BY is written here, in SQL that SQLite (≥ 3.25) and PostgreSQL both run.
(PostgreSQL's percentile_cont would interpolate between values instead.)
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db import connections
from django.db.models import F, QuerySet, Window
from django.db.models.functions import CumeDist

# k/n and p/100 differ by ≥ 1/(100·n) unless equal, so this only absorbs float rounding.
EPSILON = 1e-9


def percentiles(rows: QuerySet, by: list[str], columns: list[str], ps: tuple[int, ...],
                coarser: list[str] | None = None) -> dict[tuple, dict[Any, Any]]:
    """{group values (a tuple, in `by` order): {"n": rows, (column, "sum"): total,
    (column, p): p-th percentile, …}}. `by` and `columns` name fields or annotations of
    `rows`; the caller leaves out rows whose values are NULL.

    With `coarser` (a part of `by`), the same scan also ranks each value within the coarser
    group: (column, p, "coarser") is then the smallest value of this group at or above the
    coarser group's p-th percentile, so the coarser group's percentile is the MIN of that
    over its groups (see `coarsen`)."""
    if not all(0 < p <= 100 for p in ps):
        raise ValueError(f"a percentile is between 1 and 100, not {ps}")
    partition = [F(b) for b in by] or None
    values = {f"_v{i}": F(c) for i, c in enumerate(columns)}
    ranks = {f"_cd{i}": Window(CumeDist(), partition_by=partition, order_by=F(c).asc())
             for i, c in enumerate(columns)}
    if coarser is not None:
        wide = [F(b) for b in coarser] or None
        ranks |= {f"_cc{i}": Window(CumeDist(), partition_by=wide, order_by=F(c).asc())
                  for i, c in enumerate(columns)}
    inner = rows.order_by().annotate(**values, **ranks).values(*by, *values, *ranks)
    try:
        sql, params = inner.query.sql_with_params()
    except EmptyResultSet:  # .none(): nothing to rank
        return {}
    connection = connections[rows.db]
    qn = connection.ops.quote_name
    picks, pick_params, keys = ["COUNT(*)"], [], ["n"]
    for i, column in enumerate(columns):
        picks.append(f"SUM({qn(f'_v{i}')})")
        keys.append((column, "sum"))
        for p in ps:
            picks.append(f"MIN(CASE WHEN {qn(f'_cd{i}')} >= %s THEN {qn(f'_v{i}')} END)")
            pick_params.append(p / 100 - EPSILON)
            keys.append((column, p))
            if coarser is not None:
                picks.append(f"MIN(CASE WHEN {qn(f'_cc{i}')} >= %s THEN {qn(f'_v{i}')} END)")
                pick_params.append(p / 100 - EPSILON)
                keys.append((column, p, "coarser"))
    group = ", ".join(qn(b) for b in by)
    outer = (f"SELECT {group + ', ' if by else ''}{', '.join(picks)} FROM ({sql}) ranked"
             + (f" GROUP BY {group}" if by else ""))
    with connection.cursor() as cursor:
        cursor.execute(outer, (*pick_params, *params))
        found = cursor.fetchall()
    out = {}
    for row in found:
        figures = dict(zip(keys, row[len(by):], strict=True))
        if figures["n"]:
            out[tuple(row[:len(by)])] = figures
    return out


def coarsen(found: dict[tuple, dict[Any, Any]], by: list[str], coarser: list[str],
            columns: list[str], ps: tuple[int, ...]) -> dict[tuple, dict[Any, Any]]:
    """The coarser groups' figures from `percentiles(…, coarser=…)`'s rows: a sum of counts and
    totals and a MIN of the coarser picks over a handful of aggregate rows (no raw rows)."""
    where = [by.index(c) for c in coarser]
    out: dict[tuple, dict[Any, Any]] = {}
    for key, figures in found.items():
        wide = tuple(key[i] for i in where)
        into = out.setdefault(wide, {"n": 0, **{(c, "sum"): 0 for c in columns}})
        into["n"] += figures["n"]
        for c in columns:
            into[c, "sum"] += figures[c, "sum"] or 0
            for p in ps:
                pick = figures[c, p, "coarser"]
                if pick is not None and (into.get((c, p)) is None or pick < into[c, p]):
                    into[c, p] = pick
    return out
