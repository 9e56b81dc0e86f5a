from __future__ import annotations

from django.apps import AppConfig


class EvalsConfig(AppConfig):
    name = "agentlab.evals"
    label = "evals"
    verbose_name = "Evaluation suites"
