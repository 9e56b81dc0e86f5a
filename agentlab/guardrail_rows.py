"""Guardrail rows -> what a run's snapshot freezes: the agent's own and the global ones
("every agent"), enabled, as plain `agentlab.guardrails.checks.Check` dicts (a judge's model
profile as a ProfileConfig dict: key variable names only, like the agent's own profiles)."""

from __future__ import annotations

import dataclasses
from typing import Any

from django.db.models import Q

from agentlab.guardrails.checks import Check
from agentlab.models import Agent, Guardrail
from agentlab.profiles import to_config


def entry(row: Guardrail) -> dict[str, Any]:
    judge = (dataclasses.asdict(to_config(row.judge_profile, resolve_local=False))
             if row.kind == "judge" and row.judge_profile is not None else None)
    return dataclasses.asdict(Check(
        name=row.name, stage=row.stage, kind=row.kind, action=row.action,  # type: ignore[arg-type]
        pattern=row.pattern, limit=row.limit, message=row.message, judge=judge))


def guardrails_of(agent: Agent) -> list[dict[str, Any]]:
    """The enabled guardrails that apply to `agent`, by name."""
    rows = Guardrail.objects.filter(Q(applies_to_all=True) | Q(agents=agent), enabled=True)
    return [entry(row) for row in rows.select_related("judge_profile").distinct()
            .order_by("name")]
