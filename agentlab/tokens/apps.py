from __future__ import annotations

from django.apps import AppConfig


class TokensConfig(AppConfig):
    name = "agentlab.tokens"
    label = "tokens"
    verbose_name = "Access tokens"
