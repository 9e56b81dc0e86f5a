"""Review queues: a queue (its rubric, reviewers and how many reviews an item needs), its
items (a run, or two runs to compare), its rules (which new runs join it), and each
reviewer's review of an item (done or skipped; in pairwise mode, which run is better and why).

The rubric's values are feedback (agentlab/feedback/): a review row records that a reviewer
answered, and a pairwise choice; what they said about a run is their Feedback on it."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from agentlab.feedback.models import FeedbackKey
from traces.models import Run

MODES = [("single", "one run at a time"), ("pairwise", "two runs side by side: which is better")]
DONE, SKIPPED = "done", "skipped"
CHOICES = [("a", "A is better"), ("b", "B is better"), ("tie", "a tie")]
MAX_REVIEWS_NEEDED = 20
MAX_INSTRUCTIONS = 10_000


class QueueQuerySet(models.QuerySet["Queue"]):
    def reachable_by(self, user) -> QueueQuerySet:  # noqa: ANN001 (auth user)
        """The queues `user` reviews in; staff reach every queue."""
        if not (user.is_authenticated and user.is_active):
            return self.none()
        return self if user.is_staff else self.filter(reviewers=user)


class Queue(models.Model):
    name = models.CharField(max_length=200, unique=True)
    mode = models.CharField(max_length=16, choices=MODES, default="single")
    instructions = models.TextField(blank=True, max_length=MAX_INSTRUCTIONS,
                                    help_text="What reviewers should look for; shown beside "
                                              "every item.")
    keys = models.ManyToManyField(FeedbackKey, blank=True, related_name="queues",
                                  help_text="The feedback keys a reviewer fills (one run at a "
                                            "time).")
    thumbs = models.BooleanField(default=True, help_text="Reviewers also give thumbs up or "
                                                         "down.")
    reviewers = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True,
                                       related_name="review_queues")
    reviews_needed = models.PositiveSmallIntegerField(
        default=1, help_text="Reviews an item needs before it is done.")
    # Staff who made it: what they put in it is shown to its reviewers (docs/REVIEW.md).
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="owned_queues")
    created = models.DateTimeField(default=timezone.now)

    objects = QueueQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def pairwise(self) -> bool:
        return self.mode == "pairwise"


class Rule(models.Model):
    """New runs that match a runs-list filter join the queue as they finish (a sample of
    them, by run id); in pairwise mode each with the run it is compared to."""

    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="rules")
    query = models.CharField(max_length=2000, blank=True,
                             help_text="The runs list's filter, as its query string.")
    percent = models.FloatField(default=100, help_text="The share of matching runs kept.")
    # Runs up to this id existed when the rule was made: it looks at the runs after it.
    after = models.PositiveBigIntegerField(default=0)
    enabled = models.BooleanField(default=True)
    created = models.DateTimeField(default=timezone.now)
    checked = models.DateTimeField(null=True, blank=True)
    added = models.PositiveIntegerField(default=0)
    problem = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"{self.percent:g} % of {self.query or 'all runs'}"


class Item(models.Model):
    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="items")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    run_b = models.ForeignKey(Run, on_delete=models.CASCADE, null=True, blank=True,
                              related_name="+", help_text="Pairwise: the run compared with.")
    # Who put it there (staff): only what the queue's owner put in is shown to a reviewer who
    # may not see the run otherwise (docs/REVIEW.md "Who sees what").
    added_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                 null=True, blank=True, related_name="+")
    rule = models.ForeignKey(Rule, on_delete=models.SET_NULL, null=True, blank=True,
                             related_name="items")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["pk"]
        constraints = [
            models.UniqueConstraint(fields=["queue", "run"], condition=Q(run_b__isnull=True),
                                    name="review_item_one_run"),
            models.UniqueConstraint(fields=["queue", "run", "run_b"],
                                    condition=Q(run_b__isnull=False),
                                    name="review_item_one_pair"),
        ]

    def __str__(self) -> str:
        return f"run {self.run_id}" + (f" vs run {self.run_b_id}" if self.run_b_id else "")


class Review(models.Model):
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                 related_name="reviews")
    status = models.CharField(max_length=8, choices=[(DONE, DONE), (SKIPPED, SKIPPED)])
    choice = models.CharField(max_length=4, choices=CHOICES, blank=True)  # pairwise only
    note = models.TextField(blank=True)  # pairwise: why (AGENTLAB_FEEDBACK_NOTE_CHARS)
    created = models.DateTimeField(default=timezone.now)
    updated = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created", "pk"]
        constraints = [models.UniqueConstraint(fields=["item", "reviewer"],
                                               name="review_one_per_reviewer")]

    def __str__(self) -> str:
        return f"{self.reviewer_id} {self.status} item {self.item_id}"
