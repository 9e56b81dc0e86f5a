from __future__ import annotations

from django.apps import AppConfig


class CompareConfig(AppConfig):
    name = "agentlab.compare"
    label = "compare"
