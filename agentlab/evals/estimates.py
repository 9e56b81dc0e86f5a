"""How long an experiment will take, from the runs its agents made before: what the start
form shows before anything starts (a 41 × 7 experiment is hours on a small machine).

Runs at the same time share their model: an endpoint that takes fewer requests at once than
the experiment runs pairs (the embedded model takes one: agentlab/llm/gate.py) answers their
calls one after another, so the model's part of their time does not shrink with the
concurrency. The estimate is the longer of the two: every run's time spread over the
concurrency, and each shared model's time spread over what it takes at once. The start form's
script (static/agentlab/evals.js) computes the same from `form_data`."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, NamedTuple

from django.db.models import Avg, Count, Sum

from agentlab.models import Agent
from agentlab.profiles import concurrency, to_config
from traces.models import Run, Step
from traces.schema import FINISHED_STATUSES

SMALL_CASES = 3  # the "small first experiment": this many cases of the suite


class Past(NamedTuple):
    """What an agent's past runs say: their mean wall time and the model's part of it (s)."""

    seconds: float
    model_seconds: float


class SharedModel(NamedTuple):
    """The model an agent's runs ask (its profile's endpoint) and how many requests it takes
    at once (0: no limit)."""

    key: str
    limit: int


def agent_past(user: Any, agents: list[Agent]) -> dict[int, Past | None]:
    """Each agent's `Past` from its finished runs this user can see (None: no past run); the
    model's part is its llm steps' durations (the model's own time, not a wait for its turn)."""
    runs = (Run.objects.visible_to(user)
            .filter(agent__in=agents, status__in=FINISHED_STATUSES, wall_ms__isnull=False))
    rows = (runs.order_by().values("agent").annotate(ms=Avg("wall_ms"), n=Count("pk")))
    walls = {row["agent"]: (row["ms"] / 1000, row["n"]) for row in rows if row["n"]}
    model = dict(Step.objects.filter(run__in=runs, kind="llm", duration_ms__isnull=False)
                 .order_by().values("run__agent").annotate(ms=Sum("duration_ms"))
                 .values_list("run__agent", "ms"))
    out: dict[int, Past | None] = {}
    for agent in agents:
        if agent.pk not in walls:
            out[agent.pk] = None
            continue
        seconds, n = walls[agent.pk]
        out[agent.pk] = Past(seconds, min(seconds, (model.get(agent.pk) or 0) / 1000 / n))
    return out


def shared_models(agents: list[Agent]) -> dict[int, SharedModel]:
    """The model each agent's runs share with the others' (its profile's endpoint)."""
    out = {}
    for agent in agents:
        config = to_config(agent.model_profile)
        out[agent.pk] = SharedModel(config.base_url.rstrip("/"), concurrency(config))
    return out


def estimate(cases: int, seconds: Sequence[float | None], runs_at_once: int,
             models: Sequence[tuple[float, SharedModel] | None] = ()) -> dict[str, Any]:
    """Runs (cases × agents) and, where every agent has past runs, the expected wall time with
    `runs_at_once` runs at a time. `models[i]`: agent i's model seconds per run and the model
    it shares (absent: its runs share nothing)."""
    runs = cases * len(seconds)
    known = [s for s in seconds if s is not None]
    at_once = max(1, runs_at_once)
    total = sum(cases * s for s in known) / at_once if known else None
    queued = False
    busy: dict[SharedModel, float] = defaultdict(float)
    for s, shared in zip(seconds, models, strict=False):
        if s is not None and shared is not None and 0 < shared[1].limit < at_once:
            busy[shared[1]] += cases * shared[0]
    for model, model_seconds in busy.items():
        if total is not None and model_seconds / model.limit > total:
            total, queued = model_seconds / model.limit, True
    complete = len(known) == len(seconds)
    return {"runs": runs, "seconds": total, "complete": complete,
            "text": describe(runs, total, complete, queued)}


def describe(runs: int, seconds: float | None, complete: bool, queued: bool = False) -> str:
    what = f"{runs:,} run{'s' if runs != 1 else ''}"
    if seconds is None:
        return f"{what}; no past runs of these agents to estimate the time from"
    return (f"{what}, about {span(seconds)}{'' if complete else ' or more'} "
            "(from these agents' past runs"
            + ("; they take turns on the model they share" if queued else "") + ")")


def form_data(user: Any, agents: list[Agent]) -> dict[str, dict[int, Any]]:
    """What the start form's script estimates from, per agent: past seconds per run, the
    model's part of them, and the model it shares ([key, limit])."""
    past = agent_past(user, agents)
    models = shared_models(agents)
    return {"seconds": {pk: p.seconds if p else None for pk, p in past.items()},
            "model_seconds": {pk: p.model_seconds if p else None for pk, p in past.items()},
            "models": {pk: list(m) for pk, m in models.items()}}


def for_agents(user: Any, agents: list[Agent], cases: int,
               runs_at_once: int) -> dict[str, Any]:
    """`estimate` for these agents' past runs and shared models."""
    past = agent_past(user, agents)
    models = shared_models(agents)
    return estimate(cases, [p.seconds if p else None for p in past.values()], runs_at_once,
                    [(p.model_seconds, models[pk]) if p else None for pk, p in past.items()])


def span(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
