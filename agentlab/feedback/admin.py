"""Admin: the team's feedback keys; the feedback given, to read (only its author changes it)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin
from django.http import HttpRequest

from agentlab.feedback.models import Feedback, FeedbackKey


class FeedbackKeyForm(forms.ModelForm):
    """The categories as lines of text rather than JSON."""

    labels_text = forms.CharField(
        required=False, label="Labels", widget=forms.Textarea(attrs={"rows": 4}),
        help_text="Categories only: one label per line, e.g. rude, neutral, kind "
                  f"(at most {settings.AGENTLAB_FEEDBACK_LABEL_CHARS} characters each).")

    class Meta:
        model = FeedbackKey
        fields = ["name", "kind", "description", "minimum", "maximum", "position"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk and isinstance(self.instance.labels, list):
            self.fields["labels_text"].initial = "\n".join(map(str, self.instance.labels))

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        kind = data.get("kind")
        lines = [line.strip() for line in (data.get("labels_text") or "").splitlines()]
        self.instance.labels = [line for line in lines if line] if kind == "categories" else []
        if kind != "numeric":
            data["minimum"] = data["maximum"] = None
        return data


@admin.register(FeedbackKey)
class FeedbackKeyAdmin(admin.ModelAdmin):
    form = FeedbackKeyForm
    list_display = ["name", "kind", "range_or_labels", "description", "position"]
    list_editable = ["position"]
    fields = ["name", "kind", "description", "minimum", "maximum", "labels_text", "position"]

    @admin.display(description="values")
    def range_or_labels(self, key: FeedbackKey) -> str:
        if key.kind == "numeric":
            return f"{key.minimum:g} – {key.maximum:g}"
        if key.kind == "categories":
            return ", ".join(map(str, key.labels))
        return "yes / no"


@admin.register(Feedback)
class FeedbackAdmin(admin.ModelAdmin):
    list_display = ["shown", "run", "seq", "who", "note", "created"]
    list_filter = ["name", "source", "imported"]
    search_fields = ["note", "label", "author_name"]
    list_select_related = ["run", "key"]
    date_hierarchy = "created"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
