"""Admin: live scorers are configured here, by staff with the model's permissions (Django's
add/change/delete permissions on LiveScorer); their scores and alerts are read-only."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from agentlab.monitors.alerts import check_addresses
from agentlab.monitors.models import Alert, LiveScore, LiveScorer


class LiveScorerForm(forms.ModelForm):
    class Meta:
        model = LiveScorer
        fields = ["name", "enabled", "kind", "expected", "tolerance", "rubric", "judge_profile",
                  "key", "agent", "agent_name", "project", "sample_rate", "watermark",
                  "timeout_s", "max_tokens", "daily_budget_usd", "daily_calls", "window",
                  "alert_on", "alert_op", "alert_threshold", "alert_emails"]

    def clean_alert_emails(self) -> str:
        text = self.cleaned_data.get("alert_emails", "")
        if bad := check_addresses(text):
            raise forms.ValidationError(f"Not an e-mail address: {', '.join(bad[:5])}")
        if len(text.splitlines()) > 50:
            raise forms.ValidationError("At most 50 addresses.")
        return text


@admin.register(LiveScorer)
class LiveScorerAdmin(admin.ModelAdmin):
    form = LiveScorerForm
    list_display = ["name", "kind", "watching", "sample_rate", "enabled", "state", "page"]
    list_filter = ["enabled", "kind"]
    readonly_fields = ["state"]
    fieldsets = [
        (None, {"fields": ["name", "enabled", "state", "kind", "expected", "tolerance",
                           "rubric", "judge_profile", "key"]}),
        ("Which runs", {"fields": ["agent", "agent_name", "project", "sample_rate",
                                   "watermark"]}),
        ("Limits", {"fields": ["timeout_s", "max_tokens", "daily_budget_usd", "daily_calls"]}),
        ("Alert", {"fields": ["window", "alert_on", "alert_op", "alert_threshold",
                              "alert_emails"]}),
    ]

    @admin.display(description="state")
    def state(self, scorer: LiveScorer) -> str:
        if not scorer.pk:
            return "new"
        if not scorer.enabled:
            return "disabled"
        return scorer.paused_reason if scorer.paused else "scoring"

    @admin.display(description="page")
    def page(self, scorer: LiveScorer) -> str:
        return format_html('<a href="{}">scores</a>', reverse("monitors:scorer",
                                                              args=[scorer.pk]))


class ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(LiveScore)
class LiveScoreAdmin(ReadOnly):
    list_display = ["scorer", "run", "status", "score", "duration_ms", "cost_usd", "claimed_at"]
    list_filter = ["scorer", "status"]
    list_select_related = ["scorer", "run"]


@admin.register(Alert)
class AlertAdmin(ReadOnly):
    list_display = ["scorer", "sentence", "opened_at", "closed_at", "emailed_to"]
    list_filter = ["scorer"]
