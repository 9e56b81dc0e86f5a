"""A received run read whole: its steps become exactly what the file import makes of the same
spans (traces.otel.importer.draft: depth first, by start time; a root AGENT or CHAIN span is
the run itself), with its question, answer, status and totals. Called on the writer thread,
inside the transaction of the request that ended the trace (or of the quiet sweep)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import batched
from typing import Any

from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from agentlab.receiver.models import ReceivedSpan, ReceivedTrace
from traces import upsert
from traces.models import Run, Step
from traces.otel.decode import Span
from traces.otel.importer import OTLPError, draft
from traces.schema import RUN_TOTALS
from traces.schema import Step as StepRecord

Event = tuple[int, dict[str, Any]]  # (run id, event to publish)


@dataclass
class Ending:
    """A trace to read whole: its row, and its spans when the caller has them all in hand (a
    trace that came whole in one request); None: read them back from the database."""

    trace: ReceivedTrace
    spans: list[Span] | None = None


def read_whole(endings: list[Ending]) -> list[Event]:
    """Each ending trace's run, read whole (see the module's docstring); their status events."""
    if not endings:
        return []
    runs = Run.objects.in_bulk([e.trace.run_id for e in endings])
    drafts = [_draft(e, runs[e.trace.run_id]) for e in endings]
    held = [d for d in drafts if d.steps]
    if held:
        Step.objects.filter(run_id__in=[d.run.pk for d in held
                                        if d.existing]).delete()
        rows = [(d.run.pk, s) for d in held for s in d.steps]
        for chunk in batched(rows, upsert.ROWS_PER_STATEMENT):
            upsert.execute(upsert.statements(chunk))
    # A run read whole has its steps; one that could not be read keeps its live ones: count those.
    counts = {d.run.pk: len(d.steps) for d in held}
    if unread := [d.run.pk for d in drafts if not d.steps]:
        counts |= dict(Step.objects.filter(run_id__in=unread).values("run_id")
                       .annotate(n=Count("pk")).values_list("run_id", "n"))
    changed = []
    for d in drafts:
        d.fields["step_count"] = counts.get(d.run.pk, 0)
        for name, value in d.fields.items():
            setattr(d.run, name, value)
        changed.append(d.run)
    names = sorted({name for d in drafts for name in d.fields})
    upsert.update_rows(Run, changed, names)
    return [(d.run.pk, {"type": "run.status", "status": d.run.status, "detail": {
        "answer": d.run.final_answer, "error": d.run.error,
        "totals": {k: getattr(d.run, k) for k in RUN_TOTALS if hasattr(d.run, k)}}})
        for d in drafts]


@dataclass
class _Draft:
    run: Run
    fields: dict[str, Any]
    steps: list[StepRecord]
    existing: bool  # the run may have live steps to replace


def _draft(ending: Ending, run: Run) -> _Draft:
    trace = ending.trace
    quiet = not trace.root_span_id
    spans = ending.spans if ending.spans is not None else _stored_spans(trace)
    fields: dict[str, Any] = {}
    steps: list[StepRecord] = []
    error = ""
    if not spans:
        error = "no spans of this trace could be stored"
    else:
        try:
            fields, steps = draft(trace.trace_id, spans)
        except OTLPError as exc:  # the live steps stay; the run says why it cannot be read
            error = str(exc)
        except RecursionError:  # JSON in a JSON attribute nested past Python's parser
            error = "nested too deep to read"
    imported = dict((fields.pop("agent_snapshot", None) or {}).get("imported_from") or {})
    fields.pop("agent", None)
    fields = {k: v for k, v in fields.items() if v is not None}
    fields["agent_snapshot"] = {**run.agent_snapshot, "imported_from": {
        **run.agent_snapshot.get("imported_from", {}), **imported, "received": True,
        "project": trace.project}}
    fields.setdefault("finished_at", timezone.now())
    if quiet or error:
        fields["status"] = "interrupted" if quiet else "failed"
        why = (f"No root span arrived within {settings.AGENTLAB_RECEIVER_QUIET_S:,} s of this "
               "trace's last span (AGENTLAB_RECEIVER_QUIET_S): it ends with what it has."
               if quiet else "")
        fields["error"] = " ".join(filter(None, [why, error and
                                                 f"It could not be read whole: {error}"]))
    return _Draft(run, fields, steps, existing=ending.spans is None)


def _stored_spans(trace: ReceivedTrace) -> list[Span]:
    return [span_of(data) for data in ReceivedSpan.objects.filter(
        trace=trace, data__isnull=False).order_by("seq").values_list("data", flat=True)]


def span_of(data: dict[str, Any]) -> Span:
    """A span as stored (store.stored) back as a Span."""
    return Span(**{**data, "events": [tuple(e) for e in data.get("events") or []]})
