"""What the receiver keeps beside a received run: its trace (who sent it, where it stands)
and every span as it came, so the finished run is read from all of them at once."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from traces.models import Run


class ReceivedTrace(models.Model):
    """One trace id of one user: one run. A trace id is the sender's, so it is unique per
    user only: nobody can add spans to another user's run by sending its trace id."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="received")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="received_traces")
    trace_id = models.CharField(max_length=32)
    project = models.CharField(max_length=200, blank=True, db_index=True)
    next_seq = models.PositiveIntegerField(default=1)  # the seq the next new span's step gets
    spans = models.PositiveIntegerField(default=0)  # spans received (placeholders not counted)
    root_span_id = models.CharField(max_length=16, blank=True)  # "" until the root arrives
    last_span_at = models.DateTimeField(db_index=True)  # when its last spans arrived
    done = models.BooleanField(default=False, db_index=True)  # read whole (root, or quiet)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "trace_id"],
                                               name="unique_received_trace")]

    def __str__(self) -> str:
        return f"trace {self.trace_id} -> run {self.run_id}"


class ReceivedSpan(models.Model):
    """A span as it arrived (`data`: traces.otel.decode.Span as JSON), or a placeholder
    (`data` None) for a parent whose children came first; `seq` is its step's while live."""

    trace = models.ForeignKey(ReceivedTrace, on_delete=models.CASCADE, related_name="span_rows")
    span_id = models.CharField(max_length=16)
    seq = models.PositiveIntegerField()
    data = models.JSONField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["trace", "span_id"],
                                               name="unique_received_span")]

    def __str__(self) -> str:
        return f"span {self.span_id} of {self.trace_id}"
