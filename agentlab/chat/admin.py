from __future__ import annotations

from django.contrib import admin

from agentlab.chat.models import ChatTurn, Conversation


class ChatTurnInline(admin.TabularInline):
    model = ChatTurn
    extra = 0
    fields = ("position", "run")
    readonly_fields = ("position", "run")
    can_delete = False


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ("__str__", "user", "agent", "turn_count", "updated")
    list_filter = ("agent",)
    search_fields = ("title", "user__username")
    inlines = [ChatTurnInline]

    @admin.display(description="turns")
    def turn_count(self, obj: Conversation) -> int:
        return obj.turns.count()
