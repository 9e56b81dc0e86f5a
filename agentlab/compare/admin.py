"""Admin: saved comparisons with their runs, read-only (they are made on the compare page)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from agentlab.compare.models import Comparison, ComparisonEntry


class EntryInline(admin.TabularInline):
    model = ComparisonEntry
    fields = ["round", "position", "agent", "run"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Comparison | None = None) -> bool:
        return False


@admin.register(Comparison)
class ComparisonAdmin(admin.ModelAdmin):
    list_display = ["__str__", "user", "created"]
    list_filter = ["created"]
    search_fields = ["question", "title", "user__username"]
    readonly_fields = ["user", "question", "created"]
    inlines = [EntryInline]
