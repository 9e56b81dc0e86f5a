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


def sync_tool_rows(**kwargs: object) -> None:
    """Every registered tool gets an admin row after migrate."""
    from agentlab.tool_rows import sync_tools

    sync_tools()


def sync_code_agents(**kwargs: object) -> None:
    """Every @agent declaration gets (or updates) its read-only Agent row after migrate."""
    from agentlab.code_agents.rows import sync_all

    sync_all()
