"""Received spans -> runs, in the database (called on the writer thread: one transaction a
request, so a trace's spans from two requests never take the same seq).

While a trace is open, each span becomes a step as it arrives: the step of the span it
belongs under if that one came already, else under a *placeholder* step that stands for the
parent until it comes (OTLP sends a span when it ends, so parents come after their children).
Seqs are given in order of arrival. When the root span arrives (or the trace goes quiet:
`close_quiet`), the run is read whole: its steps become exactly what the file import makes of
the same spans (traces.otel.steps.run_from_trace: depth first, by start time), its status,
question, answer and totals with them. A span that comes again (an exporter's retry) changes
nothing; one that comes after the end reads the run whole again.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import batched
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from agentlab.receiver.models import ReceivedSpan, ReceivedTrace
from traces import upsert
from traces.bundle_values import bad_value
from traces.models import Run, Step
from traces.otel.decode import Span
from traces.otel.importer import OTLPError, draft
from traces.otel.steps import step_from_span
from traces.owners import RECEIVED
from traces.schema import Step as StepRecord

IN_CHUNK = 500  # span ids per IN (…) query, well under SQLite's bound-variable limit
WAITING = ("A span whose children arrived first: OTLP sends a span when it ends, so this "
           "step fills in when it does.")


@dataclass
class Receipt:
    """What one request did: the events to publish (persisted already), and the spans refused."""

    events: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # (run id, event)
    rejected: int = 0
    reasons: list[str] = field(default_factory=list)
    runs: list[int] = field(default_factory=list)

    def refuse(self, count: int, reason: str) -> None:
        self.rejected += count
        if reason not in self.reasons:
            self.reasons.append(reason)


def receive(user: Any, project: str, groups: dict[str, list[Span]]) -> Receipt:
    """Store each trace's spans and show them as steps (see the module's docstring)."""
    receipt = Receipt()
    arrived = time.time()
    for trace_id, spans in groups.items():
        with transaction.atomic():
            _receive_trace(user, project, trace_id.lower(), spans, receipt, arrived)
    return receipt


def _receive_trace(user: Any, project: str, trace_id: str, spans: list[Span],
                   receipt: Receipt, arrived: float) -> None:
    trace = _trace(user, project, trace_id, spans, receipt)
    if trace is None:
        return
    receipt.runs.append(trace.run_id)
    rows = _rows(trace, {s.span_id for s in spans} | {s.parent_id for s in spans if s.parent_id})
    fresh: list[Span] = []
    for span in spans:
        row = rows.get(span.span_id)
        if row is not None and row.data is not None or span.span_id in {s.span_id for s in fresh}:
            continue  # an exporter's retry, or twice in one request: nothing arrives twice
        fresh.append(span)
    most = settings.AGENTLAB_RECEIVER_MAX_SPANS_PER_RUN
    room = most - trace.spans
    if len(fresh) > room:
        receipt.refuse(len(fresh) - max(room, 0), f"trace {trace_id} holds the {most:,} spans "
                       "one run may have (AGENTLAB_RECEIVER_MAX_SPANS_PER_RUN)")
        fresh = fresh[:max(room, 0)]
    if not fresh:
        return
    steps: list[StepRecord] = []
    new_rows: list[ReceivedSpan] = []
    filled: list[ReceivedSpan] = []
    for span in fresh:
        row = rows.get(span.span_id)
        parent = None
        if span.parent_id and span.parent_id != span.span_id:
            parent_row = rows.get(span.parent_id)
            if parent_row is None:  # a child before its parent: a placeholder holds its place
                parent_row = rows[span.parent_id] = ReceivedSpan(
                    trace=trace, span_id=span.parent_id, seq=_take_seq(trace), data=None)
                new_rows.append(parent_row)
                steps.append(_placeholder(parent_row, span))
            parent = parent_row.seq
        seq = row.seq if row is not None else _take_seq(trace)
        step = step_from_span(span, seq, parent)
        if (bad := bad_value([step.input, step.output, step.meta])) is not None:
            receipt.refuse(1, f"span {span.span_id}: {bad[1]}")
            continue
        data = _stored(span)
        if row is None:
            rows[span.span_id] = row = ReceivedSpan(trace=trace, span_id=span.span_id, seq=seq,
                                                    data=data)
            new_rows.append(row)
        else:
            row.data = data
            if row.pk is not None:
                filled.append(row)
        steps.append(step)
        trace.spans += 1
        if not span.parent_id or span.parent_id == span.span_id:
            trace.root_span_id = span.span_id
    _insert(new_rows)
    ReceivedSpan.objects.bulk_update(filled, ["data"])
    trace.last_span_at = timezone.now()
    ended = bool(trace.root_span_id) or trace.done  # the root came, or it was closed quiet
    if not ended:  # else the whole read below writes every step once, in its final place
        _write_steps(trace.run_id, steps)
    trace.done = ended
    trace.save(update_fields=["next_seq", "spans", "root_span_id", "last_span_at", "done"])
    if ended:  # read whole now (again, for a span that came after the end)
        receipt.events += _read_whole(trace, quiet=not trace.root_span_id)
    else:
        _add_totals(trace.run_id, steps)
        receipt.events += [(trace.run_id, _step_event(s, arrived)) for s in steps]


def _trace(user: Any, project: str, trace_id: str, spans: list[Span],
           receipt: Receipt) -> ReceivedTrace | None:
    """The trace's row, locked for this transaction; made with its run when new (None:
    the user has as many open traces as one may)."""
    found = ReceivedTrace.objects.select_for_update().filter(user=user, trace_id=trace_id).first()
    if found is not None:
        return found
    limit = settings.AGENTLAB_RECEIVER_MAX_OPEN_TRACES
    if limit and ReceivedTrace.objects.filter(user=user, done=False).count() >= limit:
        receipt.refuse(len(spans), f"{limit:,} traces are open (no root span yet) for this user, "
                       "the most one may have (AGENTLAB_RECEIVER_MAX_OPEN_TRACES)")
        return None
    first = min(spans, key=lambda s: s.start_ns)
    service = str(first.resource.get("service.name") or "")
    project = project or _project(first.resource)
    run = Run.objects.create(
        user=user, agent=None, agent_name=(service or first.name)[:200], status="running",
        input=f"Receiving trace {trace_id} from {service or 'an OTLP exporter'}…",
        worker=RECEIVED, started_at=_when(first.start_ns) or timezone.now(),
        agent_snapshot={"imported_from": {"format": "otlp", "received": True,
                                          "trace_id": trace_id, "service": service,
                                          "project": project, "scope": first.scope}})
    try:
        with transaction.atomic():  # a savepoint: another request may make it first
            return ReceivedTrace.objects.create(run=run, user=user, trace_id=trace_id,
                                                project=project[:200],
                                                last_span_at=timezone.now())
    except IntegrityError:
        run.delete()
        return ReceivedTrace.objects.select_for_update().get(user=user, trace_id=trace_id)


def _project(resource: dict[str, Any]) -> str:
    return str(resource.get("openinference.project.name") or resource.get("service.name") or "")


def _rows(trace: ReceivedTrace, span_ids: Iterable[str]) -> dict[str, ReceivedSpan]:
    rows: dict[str, ReceivedSpan] = {}
    for chunk in batched(sorted(span_ids), IN_CHUNK):
        for row in ReceivedSpan.objects.filter(trace=trace, span_id__in=chunk):
            rows[row.span_id] = row
    return rows


def _take_seq(trace: ReceivedTrace) -> int:
    seq, trace.next_seq = trace.next_seq, trace.next_seq + 1
    return seq


def _placeholder(row: ReceivedSpan, child: Span) -> StepRecord:
    return StepRecord(seq=row.seq, parent=None, kind="thought", role="agent",
                      name="(span not arrived yet)", status="running",
                      started_at=child.start_ns / 1e9, text=WAITING,
                      meta={"otel.span_id": row.span_id, "placeholder": True})


def _stored(span: Span) -> dict[str, Any]:
    # Shallow: its values are JSON already (dataclasses.asdict deep-copies them, ~50 µs each).
    return {f: getattr(span, f) for f in _SPAN_FIELDS}


_SPAN_FIELDS = [f.name for f in dataclasses.fields(Span)]


def _span(data: dict[str, Any]) -> Span:
    return Span(**{**data, "events": [tuple(e) for e in data.get("events") or []]})


def _insert(rows: list[ReceivedSpan]) -> None:
    """ReceivedSpan rows in one statement per IN_CHUNK (bulk_create builds a model's worth of
    work per row; these are the receiver's most written rows)."""
    if not rows:
        return
    qn = connection.ops.quote_name
    data = ReceivedSpan._meta.get_field("data")
    head = (f"INSERT INTO {qn(ReceivedSpan._meta.db_table)} ({qn('trace_id')}, {qn('span_id')}, "
            f"{qn('seq')}, {qn('data')}) VALUES ")
    with connection.cursor() as cursor:
        for chunk in batched(rows, IN_CHUNK):
            params: list[Any] = []
            for row in chunk:
                params += [row.trace_id, row.span_id, row.seq,
                           data.get_db_prep_save(row.data, connection)]
            cursor.execute(head + ", ".join(["(%s, %s, %s, %s)"] * len(chunk)), params)


def _write_steps(run_id: int, steps: list[StepRecord]) -> None:
    if steps:
        upsert.execute(upsert.statements((run_id, s) for s in steps))
        # Counted from the rows: a span that fills its placeholder adds no row.
        Run.objects.filter(pk=run_id).update(step_count=Step.objects.filter(run_id=run_id).count())


def _add_totals(run_id: int, steps: list[StepRecord]) -> None:
    """The live run's counts so far (the whole read at the end sets them exactly)."""
    from django.db.models import F

    llm = [s for s in steps if s.kind == "llm"]
    tools = sum(s.kind == "tool" for s in steps)
    if llm or tools:
        Run.objects.filter(pk=run_id).update(
            llm_calls=F("llm_calls") + len(llm), tool_calls=F("tool_calls") + tools,
            tokens_in=F("tokens_in") + sum(s.tokens_in for s in llm),
            tokens_out=F("tokens_out") + sum(s.tokens_out for s in llm),
            cost_usd=F("cost_usd") + sum(s.cost_usd for s in llm))


def _step_event(step: StepRecord, arrived: float) -> dict[str, Any]:
    # version: a placeholder is 1, its span 2 (the page caches a rendering by seq and version).
    return {"type": "run.step", "seq": step.seq, "step": step.to_dict(),
            "version": 1 if step.meta.get("placeholder") else 2,
            "recorded_at": arrived, "sent_at": time.time()}


def _read_whole(trace: ReceivedTrace, *, quiet: bool) -> list[tuple[int, dict[str, Any]]]:
    """The run's steps and fields from all its spans, as the file import makes them; its
    status event. `quiet`: no root came, so it ends interrupted with what it has."""
    spans = [_span(data) for data in ReceivedSpan.objects.filter(
        trace=trace, data__isnull=False).order_by("seq").values_list("data", flat=True)]
    run = Run.objects.get(pk=trace.run_id)
    if not spans:
        fields: dict[str, Any] = {}
        steps: list[StepRecord] = []
        error = "no spans of this trace could be stored"
    else:
        try:
            fields, steps = draft(trace.trace_id, spans)
            error = ""
        except OTLPError as exc:  # the live steps stay; the run says why it cannot be read
            fields, steps, error = {}, [], str(exc)
        except RecursionError:  # JSON in a JSON attribute nested past Python's parser
            fields, steps, error = {}, [], "nested too deep to read"
    if steps:
        Step.objects.filter(run_id=run.pk).delete()
        for chunk in batched(steps, upsert.ROWS_PER_STATEMENT):
            upsert.execute(upsert.statements((run.pk, s) for s in chunk))
    imported = dict((fields.get("agent_snapshot") or {}).get("imported_from") or {})
    snapshot = {**run.agent_snapshot, "imported_from": {
        **run.agent_snapshot.get("imported_from", {}), **imported, "received": True,
        "project": trace.project}}
    update: dict[str, Any] = {k: v for k, v in fields.items()
                              if k not in ("agent_snapshot", "agent") and v is not None}
    update |= {"agent_snapshot": snapshot,
               "step_count": Step.objects.filter(run_id=run.pk).count()}
    update.setdefault("finished_at", timezone.now())
    if quiet or error:
        update["status"] = "interrupted" if quiet else "failed"
        why = (f"No root span arrived within {settings.AGENTLAB_RECEIVER_QUIET_S:,} s of this "
               "trace's last span (AGENTLAB_RECEIVER_QUIET_S): it ends with what it has."
               if quiet else "")
        update["error"] = " ".join(filter(None, [why, error and
                                                 f"It could not be read whole: {error}"]))
    Run.objects.filter(pk=run.pk).update(**update)
    run.refresh_from_db()
    detail = {"answer": run.final_answer, "error": run.error,
              "totals": {k: getattr(run, k) for k in ("llm_calls", "tool_calls", "tokens_in",
                                                       "tokens_out", "cost_usd", "wall_ms")}}
    return [(run.pk, {"type": "run.status", "status": run.status, "detail": detail})]


def close_quiet(now: datetime | None = None) -> list[tuple[int, dict[str, Any]]]:
    """Open traces whose last span came more than AGENTLAB_RECEIVER_QUIET_S ago end
    interrupted with what they have; their status events (persisted)."""
    cutoff = (now or timezone.now()) - timedelta(seconds=settings.AGENTLAB_RECEIVER_QUIET_S)
    events: list[tuple[int, dict[str, Any]]] = []
    for pk in ReceivedTrace.objects.filter(done=False, last_span_at__lt=cutoff).values_list(
            "pk", flat=True):
        with transaction.atomic():
            if not ReceivedTrace.objects.filter(pk=pk, done=False).update(done=True):
                continue  # another process closed it meanwhile
            events += _read_whole(ReceivedTrace.objects.get(pk=pk), quiet=True)
    return events


def _when(ns: int) -> datetime | None:
    try:
        return datetime.fromtimestamp(ns / 1e9, tz=UTC) if ns else None
    except (OverflowError, OSError, ValueError):
        return None
