"""The graph of a stored run, grouped in the database: one query over its steps, each joined to
its parent and grandparent by (run, seq), GROUP BY the facts traces/graph.py reads. The rows
that come back are as many as the run has distinct (agent, model, tool) combinations, however
many steps it has; past MAX_GROUPS the largest are kept and the graph says it was cut.
That query still reads every step: a long finished run's groups are stored once
(traces/graph_summary) and its page reads them, not its steps."""

from __future__ import annotations

from typing import Any

from django.core.cache import cache
from django.db import connection
from django.db.models import Q, QuerySet

from traces import graph_summary
from traces.graph import (
    CALLS,
    DEFAULT_ROLE,
    ROOT,
    Facts,
    Figures,
    Graph,
    Group,
    as_root,
    build,
    locate,
    root_role,
)
from traces.models import Run, Step

MAX_GROUPS = 5000
CACHE_S = 3600


def _depth(alias: str) -> str:
    if connection.vendor == "postgresql":
        return f"({alias}.meta ->> 'depth')"
    return f"json_extract({alias}.meta, '$.depth')"


def _facts_sql(alias: str) -> list[str]:
    """The columns that say what a step is to the graph (the same as Facts.of)."""
    calls = ", ".join(f"'{kind}'" for kind in CALLS)
    return [f"{alias}.kind", f"{alias}.role",
            f"CASE WHEN {alias}.kind IN ({calls}) THEN {alias}.name ELSE '' END",
            f"CASE WHEN {alias}.kind = 'node' THEN {_depth(alias)} END"]


def _sql() -> str:
    table = connection.ops.quote_name(Step._meta.db_table)
    facts = _facts_sql("c") + _facts_sql("p") + _facts_sql("g")
    keys = ", ".join(facts)
    return (
        f"SELECT {keys}, COUNT(*), SUM(COALESCE(c.duration_ms, 0)), SUM(c.tokens_in), "
        f"SUM(c.tokens_out), SUM(c.cost_usd), "
        f"SUM(CASE WHEN c.status = 'error' THEN 1 ELSE 0 END), MIN(c.seq) "
        f"FROM {table} c "
        f"LEFT JOIN {table} p ON p.run_id = c.run_id AND p.seq = c.parent "
        f"LEFT JOIN {table} g ON g.run_id = c.run_id AND g.seq = p.parent "
        f"WHERE c.run_id = %s GROUP BY {keys} ORDER BY COUNT(*) DESC LIMIT %s")


def _facts(values: tuple[Any, ...]) -> Facts | None:
    kind, role, name, depth = values
    return None if kind is None else Facts.of(kind, role, name, depth)


def groups(run: Run) -> tuple[list[Group], bool]:
    """The run's steps grouped by their facts, and whether the groups were cut."""
    with connection.cursor() as cursor:
        cursor.execute(_sql(), [run.pk, MAX_GROUPS + 1])
        rows = cursor.fetchall()
    found = [Group(_facts(r[0:4]), _facts(r[4:8]), _facts(r[8:12]),  # type: ignore[arg-type]
                   Figures(int(r[12]), float(r[13] or 0), int(r[14] or 0), int(r[15] or 0),
                           float(r[16] or 0), int(r[17] or 0), r[18]))
             for r in rows[:MAX_GROUPS]]
    return found, len(rows) > MAX_GROUPS


def run_graph(run: Run) -> Graph:
    if graph_summary.summed(run):
        found, cut = stored_groups(run)
    else:
        found, cut = _finished_groups(run) if not run.is_active else groups(run)
    return build(found, root_label=run.agent_name, cut=cut,
                 root_role=root_role(run.paradigm, run.agent_snapshot))


def _finished_groups(run: Run) -> tuple[list[Group], bool]:
    """A finished run's groups, kept a while in the cache: its steps no longer change, and
    every click on a node or a step opens the page again (a million steps take seconds)."""
    # the creation time too: SQLite may give a deleted run's id to the next one
    key = f"agentlab:graph:{run.pk}:{run.created.timestamp()}:{run.step_count}:{run.status}"
    found = cache.get(key)
    if found is None:
        found = groups(run)
        cache.set(key, found, CACHE_S)
    return found


def stored_groups(run: Run) -> tuple[list[Group], bool]:
    """A long finished run's groups from its stored aggregate, summed now if it has none
    (an import sums it as it finishes; a run recorded here, on its first view)."""
    found = graph_summary.load(run)
    if found is None:
        found = summarize(run)
    return found


def summarize(run: Run) -> tuple[list[Group], bool]:
    """Group the run's steps once and store them (reads every step: seconds per million)."""
    found, cut = groups(run)
    graph_summary.save(run, found, cut)
    return found, cut


def step_place(run: Run, seq: int) -> dict[str, Any] | None:
    """Step `seq`'s node and the edges it came by (two small reads: it and its ancestors)."""
    step = _row(run, seq)
    if step is None:
        return None
    parent = _row(run, step["parent"])
    grand = _row(run, parent["parent"]) if parent else None
    node, path = as_root(locate(_of(step), _of(parent), _of(grand)),  # type: ignore[arg-type]
                         root_role(run.paradigm, run.agent_snapshot))
    return {"seq": seq, "node": node, "edges": [list(e) for e in path]}


def _row(run: Run, seq: int | None) -> dict[str, Any] | None:
    if seq is None:
        return None
    found = Step.objects.filter(run=run, seq=seq).order_by().values(
        "parent", "kind", "role", "name", "meta")[:1]
    return next(iter(found), None)


def _of(row: dict[str, Any] | None) -> Facts | None:
    if row is None:
        return None
    return Facts.of(row["kind"], row["role"], row["name"], (row["meta"] or {}).get("depth"))


def node_steps(run: Run, key: str) -> QuerySet[Step]:
    """The steps a node stands for, by its key (an agent's: every step in its role)."""
    kind, _, name = key.partition(":")
    steps = run.steps.all()
    if kind == "model":
        return steps.filter(kind="llm", name=name)
    if kind == "tool":
        return steps.filter(kind="tool", name=name)
    if kind == "search" and name.startswith("depth "):
        return steps.filter(kind="node", meta__depth=_number(name[6:]))
    if kind == "agent":
        if key != ROOT:
            return steps.filter(role=name)
        also = root_role(run.paradigm, run.agent_snapshot)
        return steps.filter(Q(role=name) | Q(role="") | (Q(role=also) if also else Q()))
    return steps.none()


def _number(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


__all__ = ["DEFAULT_ROLE", "MAX_GROUPS", "groups", "node_steps", "run_graph", "step_place",
           "stored_groups", "summarize"]
