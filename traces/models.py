"""Recorded runs and their steps (see DESIGN.md "The step" and "A run")."""

from __future__ import annotations

from datetime import UTC, datetime

from django.conf import settings
from django.db import models
from django.db.models import QuerySet

from traces.schema import ACTIVE_STATUSES, RESUMABLE_STATUSES, RUN_STATUSES
from traces.schema import Step as StepRecord


class OwnedQuerySet(models.QuerySet):
    """Rows with a `user` owner: runs, comparisons, experiments, the same rule for each."""

    def visible_to(self, user) -> QuerySet:  # noqa: ANN001 (auth user or AnonymousUser)
        """A user sees their own; staff see all."""
        if not user.is_authenticated:
            return self.none()
        return self if user.is_staff else self.filter(user=user)


class RunQuerySet(OwnedQuerySet):
    def active(self) -> QuerySet[Run]:
        return self.filter(status__in=ACTIVE_STATUSES)


class Run(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="runs"
    )
    # The agent row may be edited or deleted later; the snapshot is what actually ran.
    agent = models.ForeignKey("agentlab.Agent", null=True, blank=True, on_delete=models.SET_NULL)
    agent_name = models.CharField(max_length=200, blank=True)
    paradigm = models.CharField(max_length=50, blank=True, db_index=True)
    agent_snapshot = models.JSONField(default=dict)
    input = models.TextField()
    history = models.JSONField(default=list, blank=True, help_text="Earlier chat turns (memory).")
    status = models.CharField(
        max_length=20, choices=[(s, s.replace("_", " ")) for s in RUN_STATUSES], default="queued"
    )
    final_answer = models.TextField(blank=True)
    error = models.TextField(blank=True)
    llm_calls = models.PositiveIntegerField(default=0)
    tool_calls = models.PositiveIntegerField(default=0)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    cost_usd = models.FloatField(default=0)
    wall_ms = models.FloatField(null=True, blank=True)
    format_errors = models.PositiveIntegerField(default=0)
    reflections = models.PositiveIntegerField(default=0)
    step_count = models.PositiveIntegerField(default=0)
    parent_run = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks"
    )
    fork_seq = models.PositiveIntegerField(null=True, blank=True)
    # The id of the process that owns the asyncio task (traces.owners), to spot runs left by a
    # dead process.
    worker = models.CharField(max_length=200, blank=True)
    created = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created"]
        indexes = [models.Index(fields=["user", "-created"]), models.Index(fields=["status"])]

    def __str__(self) -> str:
        return f"Run {self.pk}: {self.input[:60]}"

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_STATUSES

    @property
    def is_resumable(self) -> bool:
        return self.status in RESUMABLE_STATUSES


class Step(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="steps")
    seq = models.PositiveIntegerField()
    parent = models.PositiveIntegerField(
        null=True, blank=True, help_text="seq of the enclosing step"
    )
    kind = models.CharField(max_length=20)
    role = models.CharField(max_length=100, blank=True)
    name = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=10, default="ok")
    input = models.JSONField(null=True, blank=True)
    output = models.JSONField(null=True, blank=True)
    text = models.TextField(blank=True)
    started_at = models.DateTimeField()
    duration_ms = models.FloatField(null=True, blank=True)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    cost_usd = models.FloatField(default=0)
    meta = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="unique_step_seq")]
        # (run, x, seq): a run's steps of one kind, name or status in order, read a page at a
        # time (the run page's guardrail links and its search), never the whole run.
        indexes = [models.Index(fields=["run", "kind", "seq"], name="step_run_kind_seq"),
                   models.Index(fields=["run", "name", "seq"], name="step_run_name_seq"),
                   models.Index(fields=["run", "status", "seq"], name="step_run_status_seq"),
                   models.Index(fields=["kind", "name"])]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.seq} {self.kind} {self.name}"

    @classmethod
    def from_record(cls, run_id: int, step: StepRecord) -> Step:
        """An unsaved row for a schema Step (the inverse of to_record; for bulk writes)."""
        return cls(
            run_id=run_id, seq=step.seq, parent=step.parent, kind=step.kind, role=step.role,
            name=step.name, status=step.status, input=step.input, output=step.output,
            text=step.text, started_at=datetime.fromtimestamp(step.started_at, tz=UTC),
            duration_ms=step.duration_ms, tokens_in=step.tokens_in, tokens_out=step.tokens_out,
            cost_usd=step.cost_usd, meta=step.meta or {},
        )

    def to_record(self) -> StepRecord:
        return StepRecord(
            seq=self.seq,
            parent=self.parent,
            kind=self.kind,  # type: ignore[arg-type]
            role=self.role,
            name=self.name,
            status=self.status,  # type: ignore[arg-type]
            input=self.input,
            output=self.output,
            text=self.text,
            started_at=self.started_at.timestamp(),
            duration_ms=self.duration_ms,
            tokens_in=self.tokens_in,
            tokens_out=self.tokens_out,
            cost_usd=self.cost_usd,
            meta=self.meta,
        )


class RunTimeline(models.Model):
    """A run's timeline as an aggregate: per bucket of `width` consecutive seqs and per kind,
    how many steps, their time and the slowest (traces.timeline_summary). It covers the steps
    up to `upto` and is brought up to date by reading only the steps after it."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, primary_key=True,
                               related_name="timeline")
    upto = models.PositiveIntegerField(default=0)
    width = models.PositiveIntegerField(default=1)
    buckets = models.JSONField(default=list)
    final = models.BooleanField(default=False)  # summed after the run ended (else while live)

    def __str__(self) -> str:
        return f"timeline of run {self.run_id} (steps 1–{self.upto}, {self.width} a bucket)"


class RunGraph(models.Model):
    """A finished long run's graph as an aggregate: its steps grouped by their own, their
    parent's and their grandparent's facts, with figures (traces.graph_summary). Read by the
    graph page instead of the steps; summed again if the run's step count or status changes."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, primary_key=True,
                               related_name="graph")
    steps = models.PositiveIntegerField(default=0)  # the run's step_count when it was summed
    status = models.CharField(max_length=20, default="")  # and its status
    groups = models.JSONField(default=list)
    cut = models.BooleanField(default=False)  # past MAX_GROUPS: only the largest are kept

    def __str__(self) -> str:
        return f"graph of run {self.run_id} ({self.steps} steps, {len(self.groups)} groups)"
