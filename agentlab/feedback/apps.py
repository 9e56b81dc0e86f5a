from __future__ import annotations

from django.apps import AppConfig


class FeedbackConfig(AppConfig):
    name = "agentlab.feedback"
    label = "feedback"
    verbose_name = "Feedback"
