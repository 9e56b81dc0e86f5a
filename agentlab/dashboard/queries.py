"""The dashboard's figures, each one aggregate in the database (nothing loops over rows here):
a fixed number of queries, whatever the number of runs, steps or groups.

- Only finished runs count (succeeded, failed, timed out, cancelled, interrupted): a run still
  going has no outcome yet, and would pull the averages down. Runs in progress are counted apart.
- Completion rate = succeeded / finished runs.
- Phases of a step (llm and tool steps with a duration): tools = tool steps; planning = llm steps
  of the planner/replanner; reflection = llm steps of the reflector/evaluator/judge; execution =
  every other llm step (agent, executor, actor, worker, solver, supervisor, answerer and the
  members of a Multi-Agent run, whose roles are their own names).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import (
    Avg,
    Case,
    Count,
    Expression,
    F,
    Min,
    Q,
    QuerySet,
    Sum,
    TextField,
    Value,
    When,
)
from django.db.models.fields.json import KT, KeyTextTransform, KeyTransform
from django.db.models.functions import Coalesce, Left, NullIf, StrIndex

from agentlab.dashboard.percentiles import coarsen, percentiles
from agentlab.dashboard.period import Period
from traces.models import Run, Step
from traces.schema import FINISHED_STATUSES

# Every finished status is an outcome column (a new one, like "stopped", appears by itself).
OUTCOMES: tuple[str, ...] = tuple(FINISHED_STATUSES)
PHASES = ("planning", "execution", "reflection", "tools")
PLANNING_ROLES = ("planner", "replanner")
REFLECTION_ROLES = ("reflector", "evaluator", "judge")
ERRORS_PER_TOOL = 3
MAX_ERROR_ROWS = 500  # (tool, error) pairs read at most, the most frequent first
ERROR_TEXT_CHARS = 160


def group_expr(group: str, prefix: str = "") -> Expression:
    """The value a run is grouped by: the same lookups as the runs list's filters."""
    if group in ("model", "profile"):  # the run's default profile, as frozen at launch
        # Not KT("run__agent_snapshot__…"): KT takes the first name for the JSON field.
        key = "model" if group == "model" else "name"
        value = KeyTextTransform(key, KeyTransform("default", KeyTransform(
            "profiles", f"{prefix}agent_snapshot")))
        return Coalesce(value, Value(""), output_field=TextField())
    return F(f"{prefix}{'agent_name' if group == 'agent' else 'paradigm'}")


PHASE = Case(
    When(kind="tool", then=Value("tools")),
    When(role__in=PLANNING_ROLES, then=Value("planning")),
    When(role__in=REFLECTION_ROLES, then=Value("reflection")),
    default=Value("execution"),
)


def runs_in(user, period: Period) -> QuerySet[Run]:  # noqa: ANN001 (auth user)
    """The runs `user` may see (their own; staff all) created within the period."""
    runs = Run.objects.visible_to(user)
    if period.start:
        runs = runs.filter(created__gte=period.start)
    if period.end:
        runs = runs.filter(created__lte=period.end)
    return runs.order_by()


@dataclass
class GroupFigures:
    key: str
    runs: int
    outcomes: dict[str, int]
    avg: dict[str, float | None]  # steps, llm_calls, tool_calls per run
    p95: dict[str, float | None]
    tokens: int
    cost_usd: float
    format_error_runs: int
    format_errors: int
    llm_calls: int
    reflection_runs: int
    reflection_succeeded: int
    phases: dict[str, PhaseFigures] = field(default_factory=dict)

    @property
    def completion_rate(self) -> float | None:
        return _share(self.outcomes["succeeded"], self.runs)

    @property
    def tokens_per_run(self) -> float | None:
        return self.tokens / self.runs if self.runs else None

    @property
    def cost_per_run(self) -> float | None:
        return self.cost_usd / self.runs if self.runs else None

    @property
    def format_error_rate(self) -> float | None:
        return _share(self.format_error_runs, self.runs)

    @property
    def format_errors_per_call(self) -> float | None:
        return _share(self.format_errors, self.llm_calls)

    @property
    def reflection_rate(self) -> float | None:
        return _share(self.reflection_runs, self.runs)

    @property
    def reflection_success(self) -> float | None:
        """Of the runs that reflected at least once, the share that succeeded."""
        return _share(self.reflection_succeeded, self.reflection_runs)


@dataclass
class PhaseFigures:
    calls: int
    total_ms: float
    p50_ms: float | None = None
    p95_ms: float | None = None


@dataclass
class ToolFigures:
    name: str
    calls: int
    ok: int
    errors: int
    avg_ms: float | None
    top_errors: list[tuple[str, int, str]] = field(default_factory=list)  # key, count, example

    @property
    def success_rate(self) -> float | None:
        return _share(self.ok, self.ok + self.errors)


@dataclass
class GuardrailFigures:
    name: str
    blocked: int
    redacted: int
    flagged: int
    runs: int  # runs it acted in

    @property
    def decisions(self) -> int:
        return self.blocked + self.redacted + self.flagged


@dataclass
class Figures:
    groups: list[GroupFigures]
    phases: dict[str, PhaseFigures]  # over every group
    tools: list[ToolFigures]
    in_progress: int
    guardrails: list[GuardrailFigures] = field(default_factory=list)

    @property
    def runs(self) -> int:
        return sum(g.runs for g in self.groups)


def figures(user, period: Period) -> Figures:  # noqa: ANN001 (auth user)
    runs = runs_in(user, period)
    finished = runs.filter(status__in=OUTCOMES)
    groups = group_figures(finished, period.group)
    steps = Step.objects.filter(run__in=finished.values("pk")).order_by()
    per_group, overall = phase_figures(steps, period.group)
    by_key = {g.key: g for g in groups}
    for (key, phase), figures_ in per_group.items():
        if key in by_key:
            by_key[key].phases[phase] = figures_
    return Figures(groups=groups, phases=overall, tools=tool_figures(steps),
                   in_progress=runs.active().count(), guardrails=guardrail_figures(steps))


def group_figures(finished: QuerySet[Run], group: str) -> list[GroupFigures]:
    rows = finished.annotate(g=group_expr(group))
    outcome_counts = {s: Count("pk", filter=Q(status=s)) for s in OUTCOMES}
    aggregates = rows.values("g").annotate(
        n=Count("pk"), **outcome_counts,
        avg_steps=Avg("step_count"), avg_llm=Avg("llm_calls"), avg_tools=Avg("tool_calls"),
        tokens=Coalesce(Sum(F("tokens_in") + F("tokens_out")), 0),
        cost=Coalesce(Sum("cost_usd"), 0.0), llm=Coalesce(Sum("llm_calls"), 0),
        fmt_runs=Count("pk", filter=Q(format_errors__gt=0)),
        fmt=Coalesce(Sum("format_errors"), 0),
        refl_runs=Count("pk", filter=Q(reflections__gt=0)),
        refl_ok=Count("pk", filter=Q(reflections__gt=0, status="succeeded")),
    ).order_by("g")
    metrics = {"steps": "step_count", "llm_calls": "llm_calls", "tool_calls": "tool_calls"}
    p95 = percentiles(rows, ["g"], list(metrics.values()), (95,))
    return [GroupFigures(
        key=row["g"], runs=row["n"], outcomes={s: row[s] for s in OUTCOMES},
        avg={"steps": row["avg_steps"], "llm_calls": row["avg_llm"],
             "tool_calls": row["avg_tools"]},
        p95={k: p95.get((row["g"],), {}).get((c, 95)) for k, c in metrics.items()},
        tokens=row["tokens"], cost_usd=row["cost"], format_error_runs=row["fmt_runs"],
        format_errors=row["fmt"], llm_calls=row["llm"], reflection_runs=row["refl_runs"],
        reflection_succeeded=row["refl_ok"],
    ) for row in aggregates]


def phase_figures(steps: QuerySet[Step], group: str) -> tuple[
        dict[tuple[str, str], PhaseFigures], dict[str, PhaseFigures]]:
    """({(group, phase): figures}, {phase: figures over all groups}) of step durations."""
    timed = (steps.filter(kind__in=("llm", "tool"), duration_ms__isnull=False)
             .exclude(meta__has_key="reused")  # a ReWOO worker reusing a result is no call
             .annotate(g=group_expr(group, "run__"), phase=PHASE))
    by, ps = ["g", "phase"], (50, 95)
    found = percentiles(timed, by, ["duration_ms"], ps, coarser=["phase"])
    overall = coarsen(found, by, ["phase"], ["duration_ms"], ps)
    return ({key: _phase(f) for key, f in found.items()},
            {key[0]: _phase(f) for key, f in overall.items()})


def _phase(f: dict) -> PhaseFigures:
    return PhaseFigures(calls=f["n"], total_ms=f["duration_ms", "sum"] or 0.0,
                        p50_ms=f.get(("duration_ms", 50)), p95_ms=f.get(("duration_ms", 95)))


def tool_figures(steps: QuerySet[Step]) -> list[ToolFigures]:
    """Per tool (over every group): calls, successes, errors, the most common errors."""
    calls = (steps.filter(kind="tool", status__in=("ok", "error"))
             .exclude(meta__has_key="reused"))
    rows = calls.values("name").annotate(
        n=Count("pk"), ok=Count("pk", filter=Q(status="ok")),
        err=Count("pk", filter=Q(status="error")), avg=Avg("duration_ms"),
    ).order_by("-n", "name")
    tools = {r["name"]: ToolFigures(name=r["name"], calls=r["n"], ok=r["ok"], errors=r["err"],
                                    avg_ms=r["avg"]) for r in rows}
    first_line = Left(Case(
        When(text__contains="\n", then=Left("text", StrIndex("text", Value("\n")) - 1)),
        default=F("text"), output_field=TextField()), ERROR_TEXT_CHARS)
    errors = (calls.filter(status="error")
              .annotate(line=NullIf(first_line, Value("")))
              .annotate(error=Coalesce(NullIf(KT("output__error_type"), Value("")), "line",
                                       Left(KT("output__error"), ERROR_TEXT_CHARS),
                                       Value("unknown error"), output_field=TextField()))
              .values("name", "error").annotate(n=Count("pk"), example=Min("line"))
              .order_by("-n", "name", "error")[:MAX_ERROR_ROWS])
    for row in errors:
        tool = tools.get(row["name"])
        if tool is not None and len(tool.top_errors) < ERRORS_PER_TOOL:
            tool.top_errors.append((row["error"], row["n"], row["example"] or ""))
    return list(tools.values())


def guardrail_figures(steps: QuerySet[Step]) -> list[GuardrailFigures]:
    """Per guardrail: its decisions that acted (a judge's "pass" is none), by action, and
    the runs they were in (what the runs list's guardrail filter lists)."""
    acted = steps.filter(kind="guardrail", meta__action__in=("block", "redact", "flag"))
    rows = acted.values("name").annotate(
        blocked=Count("pk", filter=Q(meta__action="block")),
        redacted=Count("pk", filter=Q(meta__action="redact")),
        flagged=Count("pk", filter=Q(meta__action="flag")),
        runs=Count("run", distinct=True),
    ).order_by("name")
    return [GuardrailFigures(name=r["name"], blocked=r["blocked"], redacted=r["redacted"],
                             flagged=r["flagged"], runs=r["runs"]) for r in rows]


def _share(part: float, whole: float) -> float | None:
    return part / whole if whole else None

