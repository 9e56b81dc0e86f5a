from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class AgentLabConfig(AppConfig):
    name = "agentlab"
    verbose_name = "Agent Lab"

    def ready(self) -> None:
        from agentlab import checks  # noqa: F401  (registers the system checks)

        post_migrate.connect(sync_tool_rows, sender=self, dispatch_uid="agentlab-sync-tools")
        from agentlab.code_agents.rows import discover

        # Every installed app's agents.py (@agent declarations); their rows follow on migrate.
        discover()
        post_migrate.connect(sync_code_agents, sender=self, dispatch_uid="agentlab-code-agents")
        from traces import startup

        # Experiments left running by a stopped process close with its runs (traces.startup).
        startup.register_sweeper("experiments", mark_experiments_interrupted)
        from traces.display import labels

        # Pages say "ReAct", "Plan-and-Execute"; traces asks without importing agentlab.
        labels.register_paradigm_names(paradigm_label)
        labels.register_scores(run_scores)
        from django.conf import settings

        from agentlab.forks.record import prepare_for
        from agentlab.live import engine

        # A replay, fork or resume rebuilds its record where it executes (here or a worker).
        engine.plan_with(prepare_for)
        if settings.AGENTLAB_RUNS_ON == "workers":  # runs go to `manage.py worker` processes
            from agentlab.workers.engine import WorkerEngine

            engine.use(WorkerEngine())


def sync_tool_rows(**kwargs: object) -> None:
    """Every registered tool gets an admin row after migrate."""
    from agentlab.tool_rows import sync_tools

    sync_tools()


def sync_code_agents(**kwargs: object) -> None:
    """Every @agent declaration gets (or updates) its read-only Agent row after migrate."""
    from agentlab.code_agents.rows import sync_all

    sync_all()


def mark_experiments_interrupted() -> int:
    from agentlab.evals.engine import mark_interrupted

    return mark_interrupted()


def paradigm_label(key: str) -> str | None:
    from agentlab.paradigms.registry import get_paradigm

    try:
        return get_paradigm(key).label or None
    except KeyError:
        return None


def run_scores(run_id: int) -> list[dict[str, object]]:
    """A run that answered an evaluation case: its score there, for the run page's header."""
    from django.urls import reverse

    from agentlab.evals.models import Result
    from traces.display.labels import score_level

    out = []
    for r in Result.objects.filter(run_id=run_id, status="done", score__isnull=False)[:5]:
        out.append({"text": f"scored {r.score * 100:.0f} %", "level": score_level(r.score),
                    "url": reverse("evals:experiment", args=[r.experiment_id]),
                    "title": f"in experiment {r.experiment_id}: "
                             f"{'passed' if r.passed else 'did not pass'}"})
    return out
