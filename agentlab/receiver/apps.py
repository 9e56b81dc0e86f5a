from __future__ import annotations

from django.apps import AppConfig


class ReceiverConfig(AppConfig):
    name = "agentlab.receiver"
    label = "receiver"
    verbose_name = "OTLP receiver"
