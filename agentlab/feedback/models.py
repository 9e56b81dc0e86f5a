"""Feedback keys (a team's definitions, in the admin) and feedback rows (one value on a run or
one of its steps, from a person or a named scorer)."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone

from agentlab.feedback import values
from traces.models import Run

SOURCES = [("human", "a person"), ("scorer", "a scorer")]
RUN = 0  # the seq of feedback on the run as a whole (steps count from 1)


class FeedbackKey(models.Model):
    """What people (and scorers) may rate: "relevance" 1–5, "tone" rude/neutral/kind,
    "correct" yes/no."""

    name = models.CharField(max_length=values.NAME_CHARS, unique=True,
                            help_text="Typed in the runs list's filter: relevance>=4, tone=rude.")
    kind = models.CharField(max_length=16, choices=list(values.KINDS.items()))
    description = models.TextField(blank=True, max_length=1000,
                                   help_text="What it means; shown beside the value.")
    minimum = models.FloatField(null=True, blank=True, help_text="Numeric keys only.")
    maximum = models.FloatField(null=True, blank=True, help_text="Numeric keys only.")
    labels = models.JSONField(default=list, blank=True,
                              help_text="Categories only: the labels, one per line.")
    position = models.PositiveIntegerField(default=0, help_text="Order in the form.")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["position", "name"]

    def __str__(self) -> str:
        return self.name

    @property
    def spec(self) -> values.KeySpec:
        labels = tuple(str(x) for x in self.labels) if isinstance(self.labels, list) else ()
        return values.KeySpec(self.name, self.kind, self.minimum, self.maximum,  # type: ignore[arg-type]
                              labels)

    def clean(self) -> None:
        errors = values.key_errors(self.spec, label_chars=settings.AGENTLAB_FEEDBACK_LABEL_CHARS)
        if errors:
            raise ValidationError(errors)


class FeedbackQuerySet(models.QuerySet["Feedback"]):
    def visible_to(self, user) -> FeedbackQuerySet:  # noqa: ANN001 (auth user)
        """Feedback on the runs `user` may see (their own; staff all): feedback follows its run."""
        return self.filter(run__in=Run.objects.visible_to(user).values("pk"))


class Feedback(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="feedback")
    seq = models.PositiveIntegerField(default=RUN, help_text="0: the run as a whole")
    # The key's name, kept as text: the value stays readable if the key is renamed or deleted,
    # and imported feedback may name a key this installation does not define.
    name = models.CharField(max_length=values.NAME_CHARS)
    key = models.ForeignKey(FeedbackKey, on_delete=models.SET_NULL, null=True, blank=True,
                            related_name="feedback")
    score = models.FloatField(null=True, blank=True)
    label = models.TextField(blank=True)  # at most AGENTLAB_FEEDBACK_LABEL_CHARS (values.py)
    note = models.TextField(blank=True)  # at most AGENTLAB_FEEDBACK_NOTE_CHARS
    source = models.CharField(max_length=8, choices=SOURCES, default="human")
    # A person's feedback has its author, who alone may edit or delete it. A scorer's has none:
    # `author_name` is the scorer's name. Imported feedback keeps its author's name as text.
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True,
                               blank=True, related_name="feedback_given")
    author_name = models.CharField(max_length=150)
    imported = models.BooleanField(default=False)
    created = models.DateTimeField(default=timezone.now, db_index=True)
    updated = models.DateTimeField(default=timezone.now)

    objects = FeedbackQuerySet.as_manager()

    class Meta:
        ordering = ["seq", "created", "pk"]
        verbose_name_plural = "feedback"
        constraints = [
            # One value per key, target and author: giving it again edits it.
            models.UniqueConstraint(fields=["run", "seq", "name", "author"],
                                    condition=Q(author__isnull=False),
                                    name="feedback_one_per_author"),
            models.UniqueConstraint(fields=["run", "seq", "name", "source", "author_name"],
                                    condition=Q(author__isnull=True),
                                    name="feedback_one_per_named_author"),
        ]
        indexes = [models.Index(fields=["run", "seq"]), models.Index(fields=["name", "label"])]

    def __str__(self) -> str:
        where = "run" if self.seq == RUN else f"step {self.seq}"
        return f"{self.shown} on run {self.run_id} {where} by {self.author_name}"

    @property
    def shown(self) -> str:
        return values.shown(self.name, self.score, self.label)

    @property
    def who(self) -> str:
        if self.source == "scorer":
            return f"scorer {self.author_name}"
        return f"{self.author_name} (imported)" if self.imported else self.author_name

    def editable_by(self, user) -> bool:  # noqa: ANN001
        """Only its author edits or deletes it (staff too see it, but do not rewrite it)."""
        return (self.author_id is not None and user.is_authenticated and user.is_active
                and user.pk == self.author_id)
