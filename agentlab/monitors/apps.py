from __future__ import annotations

from django.apps import AppConfig


class MonitorsConfig(AppConfig):
    name = "agentlab.monitors"
    label = "monitors"
    verbose_name = "Live scorers"
