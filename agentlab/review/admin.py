"""Queues in the admin: their rules inline; items and reviews read-only (they are made on the
review pages, each checked there)."""

from __future__ import annotations

from django.contrib import admin

from agentlab.review.models import Item, Queue, Review, Rule


class RuleInline(admin.TabularInline):
    model = Rule
    extra = 0
    fields = ["query", "percent", "enabled", "after", "added", "checked", "problem"]
    readonly_fields = ["after", "added", "checked", "problem"]


@admin.register(Queue)
class QueueAdmin(admin.ModelAdmin):
    list_display = ["name", "mode", "owner", "reviews_needed", "created"]
    filter_horizontal = ["keys", "reviewers"]
    inlines = [RuleInline]
    readonly_fields = ["owner"]

    def save_model(self, request, obj, form, change) -> None:  # noqa: ANN001
        if not change:
            obj.owner = request.user
        super().save_model(request, obj, form, change)


@admin.register(Review)
class ReviewAdmin(admin.ModelAdmin):
    list_display = ["item", "reviewer", "status", "choice", "updated"]
    list_filter = ["status", "item__queue"]

    def has_add_permission(self, request) -> bool:  # noqa: ANN001
        return False

    def has_change_permission(self, request, obj=None) -> bool:  # noqa: ANN001
        return False


@admin.register(Item)
class ItemAdmin(admin.ModelAdmin):
    list_display = ["pk", "queue", "run", "run_b", "added_by", "created"]
    list_filter = ["queue"]
    raw_id_fields = ["run", "run_b"]

    def has_add_permission(self, request) -> bool:  # noqa: ANN001
        return False

    def has_change_permission(self, request, obj=None) -> bool:  # noqa: ANN001
        return False
