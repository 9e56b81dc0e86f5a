"""A saved comparison: one question put to several agents, run again as often as wanted."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from traces.models import OwnedQuerySet

MIN_AGENTS = 2
MAX_AGENTS = 6


class Comparison(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="comparisons"
    )
    question = models.TextField()
    title = models.CharField(max_length=200, blank=True)
    created = models.DateTimeField(auto_now_add=True, db_index=True)

    objects = OwnedQuerySet.as_manager()

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return self.title or self.question[:80]

    @property
    def last_round(self) -> int:
        return self.entries.aggregate(m=models.Max("round"))["m"] or 0


class ComparisonEntry(models.Model):
    """One agent's run in one round (a re-run adds a round; earlier rounds are kept)."""

    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="entries")
    round = models.PositiveIntegerField(default=1)
    position = models.PositiveSmallIntegerField()
    # The agent may be deleted later; the run (and its snapshot) is what ran.
    agent = models.ForeignKey("agentlab.Agent", null=True, blank=True, on_delete=models.SET_NULL)
    run = models.ForeignKey("traces.Run", on_delete=models.CASCADE, related_name="+")

    class Meta:
        ordering = ["comparison", "round", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["comparison", "round", "position"], name="unique_compare_slot"
            )
        ]

    def __str__(self) -> str:
        return f"{self.comparison_id} r{self.round} #{self.position}: {self.run_id}"
