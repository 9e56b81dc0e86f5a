"""The project's answers to the hooks the lower layers ask (traces/hooks.py), each named by
its dotted path in settings.AGENTLAB_HOOKS; loaded the first time one is asked."""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from agentlab.evals.models import Result
from agentlab.evals.runner import mark_interrupted
from agentlab.paradigms.registry import get_paradigm
from agentlab.receiver.store import close_quiet
from traces.display.figures import format_percent
from traces.display.labels import score_level


def paradigm_name(key: str) -> str | None:
    """Pages say "ReAct", "Plan-and-Execute"."""
    try:
        return get_paradigm(key).label or None
    except KeyError:
        return None


def run_scores(run_id: int) -> list[dict[str, Any]]:
    """A run that answered an evaluation case: its score there, for the run page's header."""
    out = []
    for r in Result.objects.filter(run_id=run_id, status="done", score__isnull=False)[:5]:
        out.append({"text": f"scored {format_percent(r.score)}", "level": score_level(r.score),
                    "url": reverse("evals:experiment", args=[r.experiment_id]),
                    "title": f"in experiment {r.experiment_id}: "
                             f"{'passed' if r.passed else 'did not pass'}"})
    return out


def sweep() -> dict[str, int]:
    """Experiments left running by a stopped process close with its runs; received traces
    that went quiet end interrupted (a process that stopped may have left them open)."""
    return {"experiments": mark_interrupted(), "received traces": len(close_quiet())}
