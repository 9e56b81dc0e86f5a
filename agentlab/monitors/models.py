"""Live scorers (staff configure them in the admin), their scores (one row per scorer and
run: claimed, then scored, skipped or failed) and their alerts (one row per episode)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q, QuerySet
from django.utils import timezone

from agentlab.evals import scorers
from agentlab.feedback import values
from agentlab.feedback.models import FeedbackKey
from agentlab.guardrails import user_regex
from agentlab.models import Agent, ModelProfile
from traces.models import Run

KINDS = [(s, s.replace("_", " ")) for s in scorers.SCORERS]
METRICS = {
    "score": "its rolling average score",
    "run_failures": "the share of watched runs that failed",
    "run_cost": "the watched runs' average cost (USD)",
    "run_latency": "the watched runs' average time (ms)",
}
OPS = [("below", "falls below"), ("above", "rises above")]
STATUSES = {
    "running": "being scored",
    "done": "scored",
    "error": "could not score",  # a ScorerError, a timeout, the judge's endpoint failing
    "unanswered": "the run ended without an answer",
    "skipped": "not scored: the scorer was paused (its budget)",
}
MAX_WINDOW = 1_000


class LiveScorer(models.Model):
    """One suite scorer watching finished runs: which runs, how many, within what limits, and
    when to raise an alert."""

    name = models.CharField(
        max_length=100, unique=True,
        help_text="Shown as the feedback's author: “scorer NAME” on the run page.")
    enabled = models.BooleanField(default=True)
    kind = models.CharField(max_length=20, choices=KINDS, default="contains")
    expected = models.TextField(
        blank=True, max_length=scorers.MAX_SCHEMA_CHARS,
        help_text="exact / contains: the text; numeric: the number; regex: the pattern "
        "(capped and timed); json schema: the schema (JSON); llm judge: a reference answer "
        "(optional).")
    tolerance = models.FloatField(null=True, blank=True, help_text="numeric only.")
    rubric = models.TextField(blank=True, max_length=4000,
                              help_text="llm judge: what a good answer does.")
    judge_profile = models.ForeignKey(
        ModelProfile, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="llm judge: the model profile it asks. Only this profile: never its "
        "fallback, whose endpoint was not chosen to read these runs.")
    # Which runs: every condition given must hold (at least one is needed).
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+", help_text="Agent Lab's own runs of this agent.")
    agent_name = models.CharField(
        max_length=200, blank=True, help_text="Runs whose agent has this name, any source "
        "(an imported or received run's service or agent name).")
    project = models.CharField(
        max_length=200, blank=True,
        help_text="Imported or received runs of this project (as the runs list's Project).")
    key = models.CharField(
        "feedback key", max_length=values.NAME_CHARS,
        help_text="The feedback's name, typed in the runs list's filter (correct>=0.5); a "
        "numeric key 0–1 of this name is made if there is none.")
    sample_rate = models.FloatField(
        default=1.0, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Share of the watched runs scored, 0–1 (the same runs in every process).")
    timeout_s = models.FloatField(
        "timeout (s)", default=30.0, validators=[MinValueValidator(0.1), MaxValueValidator(600)],
        help_text="One score's time; past it, the score is an error.")
    max_tokens = models.PositiveIntegerField(
        default=400, validators=[MinValueValidator(16), MaxValueValidator(8000)],
        help_text="llm judge: the longest reply it may write.")
    daily_budget_usd = models.FloatField(
        "daily budget (USD)", null=True, blank=True, validators=[MinValueValidator(0.0)],
        help_text="llm judge: spent at most this a day (UTC); then scoring pauses until "
        "midnight. A call is made only when its most it can cost still fits.")
    daily_calls = models.PositiveIntegerField(
        null=True, blank=True, help_text="llm judge: at most this many calls a day (UTC).")
    window = models.PositiveIntegerField(
        default=20, validators=[MinValueValidator(1), MaxValueValidator(MAX_WINDOW)],
        help_text="The rolling average and the alert read the last N runs scored.")
    alert_on = models.CharField(max_length=20, blank=True,
                                choices=[("", "no alert"), *METRICS.items()])
    alert_op = models.CharField(max_length=8, choices=OPS, default="below")
    alert_threshold = models.FloatField(null=True, blank=True)
    alert_emails = models.TextField(
        blank=True, help_text="Who an alert is e-mailed to, one address a line (blank: the "
        "staff users with an address).")
    watermark = models.BigIntegerField(
        null=True, blank=True, help_text="Every watched run with an id up to this one is "
        "settled. A new scorer starts after the newest run; lower it (0: all) to score past "
        "runs too.")
    paused_until = models.DateTimeField(null=True, blank=True, editable=False)
    paused_reason = models.CharField(max_length=300, blank=True, editable=False)
    created = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.watermark is None:  # a new scorer watches what comes from now on
            self.watermark = Run.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
        super().save(*args, **kwargs)

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if not (self.agent_id or self.agent_name or self.project):
            errors["agent"] = "Choose the runs to watch: an agent, an agent name or a project."
        name_problem = values.key_errors(values.KeySpec(self.key, "numeric", 0, 1),
                                         label_chars=100).get("name")
        if problem := name_problem or self._key_problem():
            errors["key"] = problem
        errors |= self._scorer_errors()
        if self.alert_on and self.alert_threshold is None:
            errors["alert_threshold"] = "An alert needs a threshold."
        if self.alert_on == "score" and self.alert_threshold is not None and not (
                0 <= self.alert_threshold <= 1):
            errors["alert_threshold"] = "A score is from 0 to 1."
        if errors:
            raise ValidationError(errors)

    def _key_problem(self) -> str:
        """Why an existing feedback key of this name cannot hold a score from 0 to 1."""
        key = FeedbackKey.objects.filter(name=self.key).first()
        if key is None or key.kind == "boolean":
            return ""
        if key.kind == "categories":
            shown = "has categories"
        elif (key.minimum or 0) <= 0 and (key.maximum or 0) >= 1:
            return ""
        else:
            shown = f"is numeric {key.minimum:g}–{key.maximum:g}"
        return (f"The feedback key “{key.name}” {shown}: a scorer writes a score from 0 to 1. "
                "Choose another name.")

    def _scorer_errors(self) -> dict[str, str]:
        if self.kind == "llm_judge":
            return {} if self.judge_profile_id else {"judge_profile": "The LLM judge needs "
                                                      "a model profile."}
        if self.kind in ("exact", "contains", "numeric", "regex", "json_schema") and \
                not self.expected.strip():
            return {"expected": f"The {self.get_kind_display()} scorer needs it."}
        if self.kind == "regex":
            try:  # the rules a guardrail's deny-list pattern is held to: capped, then timed
                user_regex.check_speed(self.expected)
            except user_regex.UnsafePattern as exc:
                return {"expected": str(exc)}
        try:
            if self.kind == "json_schema":
                scorers.read_schema(self.expected)
            elif self.kind == "numeric":
                scorers.score_answer("numeric", "0", self.expected, self.tolerance)
        except scorers.ScorerError as exc:
            return {"expected": str(exc)}
        return {}

    @property
    def paused(self) -> bool:
        return bool(self.paused_until and self.paused_until > timezone.now())

    def watched(self) -> QuerySet[Run]:
        """The runs this scorer watches, of every source and user (finished or not)."""
        runs = Run.objects.all()
        if self.agent_id:
            runs = runs.filter(agent_id=self.agent_id)
        if self.agent_name:
            runs = runs.filter(agent_name=self.agent_name)
        if self.project:
            runs = runs.filter(agent_snapshot__imported_from__project=self.project)
        return runs

    @property
    def alert_rule(self) -> str:
        if not self.alert_on or self.alert_threshold is None:
            return ""
        verb = dict(OPS).get(self.alert_op, self.alert_op)
        return (f"{METRICS.get(self.alert_on, self.alert_on)} over the last {self.window} runs "
                f"{verb} {self.alert_threshold:g}")

    def watching(self) -> str:
        parts = []
        if self.agent_id:
            parts.append(f"agent {self.agent.name if self.agent else self.agent_id}")
        if self.agent_name:
            parts.append(f"agent name “{self.agent_name}”")
        if self.project:
            parts.append(f"project “{self.project}”")
        return ", ".join(parts) or "nothing"


class LiveScoreQuerySet(QuerySet["LiveScore"]):
    def visible_to(self, user: Any) -> LiveScoreQuerySet:
        """Scores of the runs `user` may see: a score follows its run."""
        return self.filter(run__in=Run.objects.visible_to(user).values("pk"))


class LiveScore(models.Model):
    """One scorer's work on one run: the row is its claim (unique), then its outcome."""

    scorer = models.ForeignKey(LiveScorer, on_delete=models.CASCADE, related_name="scores")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="live_scores")
    status = models.CharField(max_length=12, choices=list(STATUSES.items()), default="running")
    score = models.FloatField(null=True, blank=True)
    passed = models.BooleanField(null=True, blank=True)
    error = models.TextField(blank=True)
    detail = models.JSONField(default=dict, blank=True)
    duration_ms = models.FloatField(null=True, blank=True)
    cost_usd = models.FloatField(default=0)
    calls = models.PositiveIntegerField(default=0)  # judge requests sent (budget in calls)
    # The watched run as it ended (what failure-rate, cost and latency alerts read).
    run_status = models.CharField(max_length=20, blank=True)
    run_cost_usd = models.FloatField(default=0)
    run_wall_ms = models.FloatField(null=True, blank=True)
    claimed_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = LiveScoreQuerySet.as_manager()

    class Meta:
        ordering = ["-pk"]
        constraints = [models.UniqueConstraint(fields=["scorer", "run"],
                                               name="live_score_one_per_run")]
        indexes = [models.Index(fields=["scorer", "status", "-id"]),
                   models.Index(fields=["scorer", "claimed_at"])]

    def __str__(self) -> str:
        return f"{self.scorer} on run {self.run_id}: {self.status}"

    @property
    def why(self) -> str:
        """What the scorer said of its result: the judge's reasoning, a schema's first
        problem, or why it could not score."""
        detail = self.detail if isinstance(self.detail, dict) else {}
        return self.error or str(detail.get("reasoning") or detail.get("reason") or "")


class AlertQuerySet(QuerySet["Alert"]):
    def visible_to(self, user: Any) -> AlertQuerySet:
        """Staff see every alert; another user only one whose runs were all theirs."""
        if not (user.is_authenticated and user.is_active):
            return self.none()
        return self.all() if user.is_staff else self.filter(owner_id=user.pk)

    def open(self) -> AlertQuerySet:
        return self.filter(closed_at__isnull=True)


class Alert(models.Model):
    """One episode: opened when the scorer's threshold was crossed, closed when it recovered."""

    scorer = models.ForeignKey(LiveScorer, on_delete=models.CASCADE, related_name="alerts")
    metric = models.CharField(max_length=20, choices=list(METRICS.items()))
    op = models.CharField(max_length=8, choices=OPS)
    threshold = models.FloatField()
    window = models.PositiveIntegerField()
    value = models.FloatField(help_text="The metric when the alert opened.")
    last_value = models.FloatField(null=True, blank=True)
    # The one user whose runs made the window (who may see it besides staff); null: several.
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                              on_delete=models.CASCADE, related_name="+")
    opened_at = models.DateTimeField(default=timezone.now, db_index=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    emailed_to = models.TextField(blank=True)
    recovered_emailed = models.BooleanField(default=False)

    objects = AlertQuerySet.as_manager()

    class Meta:
        ordering = ["-opened_at", "-pk"]
        constraints = [models.UniqueConstraint(fields=["scorer"],
                                               condition=Q(closed_at__isnull=True),
                                               name="alert_one_open_per_scorer")]

    def __str__(self) -> str:
        return f"{self.scorer}: {self.sentence}"

    @property
    def sentence(self) -> str:
        verb = "fell below" if self.op == "below" else "rose above"
        return (f"{METRICS.get(self.metric, self.metric)} over the last {self.window} runs "
                f"{verb} {self.threshold:g}: {self.value:.3g}")
