"""Suites of cases, experiments that run a suite against agents, and one result per pair."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q, QuerySet

from traces.models import OwnedQuerySet

SCORERS = ("exact", "contains", "numeric", "regex", "json_schema", "llm_judge")
EXPERIMENT_STATUSES = ("queued", "running", "succeeded", "failed", "cancelled", "interrupted")
ACTIVE_EXPERIMENT_STATUSES = EXPERIMENT_STATUSES[:2]  # the rest are its endings
RESULT_STATUSES = ("pending", "running", "done", "error", "cancelled")
UNFINISHED_RESULT_STATUSES = RESULT_STATUSES[:2]
FINISHED_RESULT_STATUSES = RESULT_STATUSES[2:]


def clean_tags(tags: Iterable[str]) -> list[str]:
    """Tags as a person typed them: trimmed, without blanks or repeats, in their order."""
    return list(dict.fromkeys(t.strip() for t in tags if t.strip()))


class SuiteQuerySet(QuerySet):
    """Who sees and who adds to a suite. A shared suite (no owner: the demo, the admin's,
    imported ones) is seen by everyone and edited by staff; a suite someone made from their
    runs holds those runs' questions and answers, so like the runs it is its owner's (and
    staff's) alone."""

    def visible_to(self, user: Any) -> SuiteQuerySet:
        if not _active(user):
            return self.none()
        return self.all() if user.is_staff else self.filter(
            Q(owner__isnull=True) | Q(owner_id=user.pk))

    def editable_by(self, user: Any) -> SuiteQuerySet:
        if not _active(user):
            return self.none()
        return self.all() if user.is_staff else self.filter(owner_id=user.pk)


def _active(user: Any) -> bool:
    return bool(user is not None and user.is_authenticated and user.is_active and user.pk)


class Suite(models.Model):
    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
        related_name="suites", help_text="Blank: a shared suite, seen by everyone and edited "
        "by staff. Set: seen and edited by this user (and staff) only.")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    objects = SuiteQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Case(models.Model):
    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="cases")
    position = models.PositiveIntegerField(default=0)
    question = models.TextField()
    expected = models.TextField(
        blank=True, help_text="Expected answer (a number for numeric, a pattern for regex)."
    )
    scorer = models.CharField(
        max_length=20, choices=[(s, s.replace("_", " ")) for s in SCORERS], default="contains"
    )
    tolerance = models.FloatField(
        null=True, blank=True, help_text="numeric: largest accepted |answer − expected|."
    )
    rubric = models.TextField(blank=True, help_text="llm judge: what a good answer must contain.")
    tags = models.JSONField(default=list, blank=True)
    # The run the case was made from ("Add to suite"); kept when the run is deleted, unlinked.
    source_run = models.ForeignKey(
        "traces.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="cases")

    class Meta:
        ordering = ["suite", "position", "id"]

    def __str__(self) -> str:
        return f"{self.suite_id}#{self.position}: {self.question[:60]}"


class Experiment(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="experiments"
    )
    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="experiments")
    title = models.CharField(max_length=200, blank=True)
    status = models.CharField(
        max_length=20, choices=[(s, s) for s in EXPERIMENT_STATUSES], default="queued"
    )
    concurrency = models.PositiveSmallIntegerField(default=2)
    agents = models.ManyToManyField("agentlab.Agent", related_name="experiments")
    judge_profile = models.ForeignKey(
        "agentlab.ModelProfile", null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+", help_text="Model that scores llm-judge cases.",
    )
    # Only the cases carrying one of these tags (empty: every case), then the first N of those
    # (by position; null = all of them).
    case_tags = models.JSONField(default=list, blank=True)
    case_limit = models.PositiveIntegerField(null=True, blank=True)
    # Caps every run's total timeout (quick evaluations on a slow model); null = each agent's own.
    run_timeout_s = models.PositiveIntegerField(
        null=True, blank=True, help_text="At most this many seconds per run (blank: the agent's "
        "own limit).")
    previous = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reruns",
        help_text="The experiment this one re-runs (and is compared with).",
    )
    error = models.TextField(blank=True)
    worker = models.CharField(max_length=200, blank=True,
                              help_text="the process running it (traces.workers)")
    created = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = OwnedQuerySet.as_manager()

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return self.title or f"{self.suite} #{self.pk}"

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_EXPERIMENT_STATUSES

    def selected_cases(self) -> QuerySet[Case]:
        cases = self.suite.cases.order_by("position", "id")
        if self.case_tags:  # in Python: SQLite has no JSON "contains" lookup
            wanted = set(self.case_tags)
            cases = cases.filter(pk__in=[c.pk for c in cases.only("pk", "tags")
                                         if wanted & set(c.tags or [])])
        return cases[: self.case_limit] if self.case_limit else cases

    def progress(self) -> tuple[int, int]:
        """(finished results, all pairs); before the results exist, total is cases × agents."""
        counts = self.results.aggregate(
            total=models.Count("id"),
            done=models.Count("id", filter=Q(status__in=FINISHED_RESULT_STATUSES)),
        )
        total = counts["total"] or self.selected_cases().count() * self.agents.count()
        return counts["done"], total


class Result(models.Model):
    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="results")
    case = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="results")
    agent = models.ForeignKey(
        "agentlab.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    agent_name = models.CharField(max_length=200, blank=True)
    run = models.ForeignKey(
        "traces.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(
        max_length=20, choices=[(s, s) for s in RESULT_STATUSES], default="pending"
    )
    score = models.FloatField(null=True, blank=True, help_text="0..1")
    passed = models.BooleanField(null=True, blank=True)
    scorer_detail = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["experiment", "case__position", "case_id", "agent_name"]
        constraints = [
            models.UniqueConstraint(
                fields=["experiment", "case", "agent"], name="unique_result_pair"
            )
        ]
        indexes = [models.Index(fields=["experiment", "status"])]

    def __str__(self) -> str:
        return f"{self.experiment_id}: case {self.case_id} × {self.agent_name}"


class PlaygroundCase(models.Model):
    """An LLM call saved from a step ("Add to playground cases"): the request as sent
    (messages; tools, tool_choice, response_format, stop, temperature, max_tokens) and the
    reply expected, which the playground opens to send again to any model profile. Its
    owner's alone (a personal list, like conversations and access tokens)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="playground_cases")
    name = models.CharField(max_length=200)
    messages = models.JSONField(default=list)
    params = models.JSONField(default=dict, blank=True)
    profile = models.CharField(max_length=200, blank=True, help_text="the profile it was "
                               "recorded with (the playground's first choice)")
    expected = models.TextField(blank=True, help_text="the reply expected: the recorded "
                                "reply (its text, or its tool calls), or a corrected one")
    tags = models.JSONField(default=list, blank=True)
    source_run = models.ForeignKey("traces.Run", null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="playground_cases")
    source_seq = models.PositiveIntegerField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return self.name
