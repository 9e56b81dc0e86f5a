"""Conversations with an agent; each turn is one recorded run (its trace is the turn's record)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import QuerySet


class ConversationQuerySet(models.QuerySet["Conversation"]):
    def owned_by(self, user) -> QuerySet[Conversation]:  # noqa: ANN001 (user or anonymous)
        """Conversations are personal: only their owner sees them (staff included)."""
        if not user.is_authenticated:
            return self.none()
        return self.filter(user=user)


class Conversation(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations"
    )
    # An agent deleted later leaves its conversations readable (each run keeps its snapshot).
    agent = models.ForeignKey(
        "agentlab.Agent", null=True, on_delete=models.SET_NULL, related_name="conversations"
    )
    title = models.CharField(max_length=200, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True, db_index=True)

    objects = ConversationQuerySet.as_manager()

    class Meta:
        ordering = ["-updated"]

    def __str__(self) -> str:
        return self.title or f"Conversation {self.pk}"


class ChatTurn(models.Model):
    """One question and its answer: the run that answered it."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="turns")
    run = models.OneToOneField("traces.Run", on_delete=models.CASCADE, related_name="chat_turn")
    position = models.PositiveIntegerField()

    class Meta:
        ordering = ["conversation", "position"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "position"],
                                    name="unique_turn_position")
        ]

    def __str__(self) -> str:
        return f"{self.conversation} #{self.position}"
