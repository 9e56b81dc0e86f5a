from __future__ import annotations

from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "agentlab.chat"
    label = "chat"
