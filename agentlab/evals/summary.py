"""What an experiment's results add up to: per agent, as a matrix, and against an earlier one.

Figures are aggregated in the database (Result joined with its Run). In the mean score and the
pass rate an *error* result counts as 0 / not passed (a run that failed did not answer);
pending, running and cancelled results are not counted at all, nor is one whose run failed
because the model it shared was busy (`pairs.MODEL_BUSY`: it says nothing about the agent).
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

from django.db.models import Count, FloatField, IntegerField, Q, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

from agentlab.evals import pairs
from agentlab.evals.models import Case, Experiment, Result

SCORED = ("done", "error")
MODEL_BUSY = Q(scorer_detail__has_key=pairs.MODEL_BUSY)  # an error result, not counted
COUNTED = Q(status__in=SCORED) & ~MODEL_BUSY  # what the mean score and the pass rate count


def agent_summary(experiment: Experiment) -> list[dict[str, Any]]:
    """One dict per agent, by name: agent_id, agent, cases, finished (scored: model-busy
    results are not), errors, busy (model busy: not counted), passed,
    mean_score (0..1 or None), pass_rate (0..1 or None), runs, succeeded, stopped (runs a
    limit stopped that answered from their findings), tokens_in,
    tokens_out, tokens, cost_usd, wall_s (all runs together), mean_wall_s (per run), and the
    LLM judge's own judge_tokens and judge_cost_usd (kept apart: the agent did not spend them).
    """
    scored = COUNTED
    rows = (experiment.results.values("agent_id", "agent_name")
            .annotate(cases=Count("id"), finished=Count("id", filter=scored),
                      errors=Count("id", filter=Q(status="error") & ~MODEL_BUSY),
                      busy=Count("id", filter=Q(status="error") & MODEL_BUSY),
                      passed=Count("id", filter=Q(passed=True) & scored),
                      score_sum=Sum("score", filter=scored), runs=Count("run"),
                      succeeded=Count("id", filter=Q(run__status="succeeded")),
                      stopped=Count("id", filter=Q(run__status="stopped")),
                      timed=Count("run__wall_ms"),
                      tokens_in=Sum("run__tokens_in"), tokens_out=Sum("run__tokens_out"),
                      cost_usd=Sum("run__cost_usd"), wall_ms=Sum("run__wall_ms"),
                      judge_in=_detail_sum("tokens_in", IntegerField()),
                      judge_out=_detail_sum("tokens_out", IntegerField()),
                      judge_cost=_detail_sum("cost_usd", FloatField()))
            .order_by("agent_name", "agent_id"))
    out = []
    for r in rows:
        finished, timed = r["finished"], r["timed"]
        tokens_in, tokens_out = r["tokens_in"] or 0, r["tokens_out"] or 0
        wall_s = (r["wall_ms"] or 0) / 1000
        out.append({
            "agent_id": r["agent_id"], "agent": r["agent_name"], "cases": r["cases"],
            "finished": finished, "errors": r["errors"], "busy": r["busy"],
            "passed": r["passed"],
            "mean_score": (r["score_sum"] or 0) / finished if finished else None,
            "pass_rate": r["passed"] / finished if finished else None,
            "runs": r["runs"], "succeeded": r["succeeded"], "stopped": r["stopped"],
            "tokens_in": tokens_in,
            "tokens_out": tokens_out, "tokens": tokens_in + tokens_out,
            "cost_usd": r["cost_usd"] or 0.0, "wall_s": wall_s,
            "mean_wall_s": wall_s / timed if timed else None,
            "judge_tokens": (r["judge_in"] or 0) + (r["judge_out"] or 0),
            "judge_cost_usd": r["judge_cost"] or 0.0,
        })
    return out


def _detail_sum(key: str, field: IntegerField | FloatField) -> Sum:
    """The sum of a number the LLM judge wrote into its results' scorer_detail."""
    return Sum(Cast(KT(f"scorer_detail__{key}"), field),
               filter=Q(scorer_detail__scorer="llm_judge"))


class Column(NamedTuple):
    agent_id: int | None
    name: str


def matrix(experiment: Experiment) -> tuple[list[Case], list[Column], list[list[Result | None]]]:
    """(cases in suite order, agent columns by name, cells[i][j] = the result of case i for
    agent j, or None where that pair has no result)."""
    results = list(experiment.results.select_related("run", "case"))
    cases = sorted({r.case_id: r.case for r in results}.values(),
                   key=lambda c: (c.position, c.pk)) or list(experiment.selected_cases())
    columns = sorted({Column(r.agent_id, r.agent_name) for r in results},
                     key=lambda c: (c.name, c.agent_id or 0))
    at = {(r.case_id, _agent_key(r)): r for r in results}
    cells = [[at.get((case.pk, _column_key(col))) for col in columns] for case in cases]
    return cases, columns, cells


Change = Literal["better", "worse", "same"]


class Comparison(NamedTuple):
    case: Case
    agent: str
    before: Result
    after: Result
    change: Change


def compare(experiment: Experiment, earlier: Experiment) -> list[Comparison]:
    """Every (case, agent) finished in both experiments, by score (an error counts as 0; a
    model-busy result is no score)."""
    before = {(r.case_id, _agent_key(r)): r for r in earlier.results.filter(COUNTED)}
    out = []
    for r in experiment.results.filter(COUNTED).select_related("case"):
        old = before.get((r.case_id, _agent_key(r)))
        if old is None:
            continue
        delta = (r.score or 0.0) - (old.score or 0.0)
        change: Change = "better" if delta > 1e-9 else "worse" if delta < -1e-9 else "same"
        out.append(Comparison(r.case, r.agent_name, old, r, change))
    out.sort(key=lambda c: (c.case.position, c.case.pk, c.agent))
    return out


def change_counts(changes: list[Comparison]) -> dict[str, int]:
    return {k: sum(c.change == k for c in changes) for k in ("better", "worse", "same")}


def _agent_key(r: Result) -> Any:
    # The agent row identifies a column across renames; a deleted agent keeps its name.
    return r.agent_id if r.agent_id is not None else f"name:{r.agent_name}"


def _column_key(col: Column) -> Any:
    return col.agent_id if col.agent_id is not None else f"name:{col.name}"
