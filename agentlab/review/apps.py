from __future__ import annotations

from django.apps import AppConfig
from django.core.signals import request_started


class ReviewConfig(AppConfig):
    name = "agentlab.review"
    label = "review"
    verbose_name = "Review queues"

    def ready(self) -> None:
        from agentlab.review import sync

        # A web process starts its rules' thread at its first request (not here: Django
        # discourages queries while the apps load, and not every command serves pages).
        request_started.connect(sync.on_request_started, dispatch_uid="review-rules-thread")
