"""The rows of a request's traces (called by agentlab/receiver/store.py, inside its
transaction): each trace opened or found, locked, with its run (a new one's inserted after the
store has seen it unsaved: one that came whole is inserted as it ends); the stored spans the
request names; new span rows written a statement at a time."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import batched
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import BooleanField, ExpressionWrapper, Q
from django.utils import timezone

from agentlab.receiver.models import ReceivedSpan, ReceivedTrace
from agentlab.runs.start import received_runs
from traces.models import Run
from traces.otel.decode import Span
from traces.upsert import insert_rows, json_values

IN_CHUNK = 500  # ids per IN (…) query, well under SQLite's bound-variable limit
# What the store does with a new trace (its run at `trace.run`), neither saved yet.
Ready = Callable[[ReceivedTrace, list[Span]], None]


def is_root(span: Span) -> bool:
    return not span.parent_id or span.parent_id == span.span_id


def opened(user: Any, project: str, wanted: dict[str, list[Span]],
           receipt: Any, ready: Ready) -> dict[str, ReceivedTrace]:
    """The request's traces by id, locked for this transaction; the new ones made with their
    runs (none past the user's limit of open traces), each given to `ready` before its rows
    are inserted."""
    found: dict[str, ReceivedTrace] = {}
    for chunk in batched(wanted, IN_CHUNK):
        for trace in ReceivedTrace.objects.select_for_update().filter(user=user,
                                                                      trace_id__in=chunk):
            trace.fresh = False
            found[trace.trace_id] = trace
    new = [t for t in wanted if t not in found]
    if not new:
        return found
    limit = settings.AGENTLAB_RECEIVER_MAX_OPEN_TRACES
    # A trace that comes whole (its root in hand) is never open; count the others (none: no
    # count asked for, as in an exporter's batches of finished small traces).
    opening = [t for t in new if not any(is_root(s) for s in wanted[t])]
    if limit and opening:
        open_now = ReceivedTrace.objects.filter(user=user, done=False).count()
        for trace_id in opening:
            if open_now >= limit:
                new.remove(trace_id)
                receipt.refuse(len(wanted[trace_id]), f"{limit:,} traces are open (no root "
                               "span yet) for this user, the most one may have "
                               "(AGENTLAB_RECEIVER_MAX_OPEN_TRACES)")
            open_now += 1
    try:
        with transaction.atomic():  # a savepoint: another request may make one first
            found |= _make(user, project, {t: wanted[t] for t in new}, ready)
    except IntegrityError:  # then one at a time, each taking the one made meanwhile
        for trace_id in new:
            try:
                with transaction.atomic():
                    found |= _make(user, project, {trace_id: wanted[trace_id]}, ready)
            except IntegrityError:
                trace = ReceivedTrace.objects.select_for_update().get(user=user,
                                                                      trace_id=trace_id)
                trace.fresh = False
                found[trace_id] = trace
    return found


def _make(user: Any, project: str, wanted: dict[str, list[Span]],
          ready: Ready) -> dict[str, ReceivedTrace]:
    fields, projects = [], []
    for trace_id, spans in wanted.items():
        first = min(spans, key=lambda s: s.start_ns)
        service = str(first.resource.get("service.name") or "")
        projects.append((project or str(first.resource.get("openinference.project.name")
                                        or service))[:200])
        fields.append({
            "agent_name": (service or first.name)[:200],
            "input": f"Receiving trace {trace_id} from {service or 'an OTLP exporter'}…",
            "started_at": _when(first.start_ns) or timezone.now(),
            "agent_snapshot": {"imported_from": {
                "format": "otlp", "received": True, "trace_id": trace_id, "service": service,
                "project": projects[-1], "scope": first.scope}}})
    runs = received_runs(user, fields)
    now = timezone.now()
    made = [ReceivedTrace(run=run, user=user, trace_id=trace_id, project=p, last_span_at=now)
            for run, trace_id, p in zip(runs, wanted, projects, strict=True)]
    for trace in made:
        trace.fresh = True
        ready(trace, wanted[trace.trace_id])  # may set the run's and the trace's last fields
    insert_rows(Run, runs)
    for trace, run in zip(made, runs, strict=True):
        trace.run = run  # its id, now that it has one
    return {t.trace_id: t for t in insert_rows(ReceivedTrace, made)}


def stored_rows(traces: dict[str, ReceivedTrace],
                wanted: dict[str, list[Span]]) -> dict[int, dict[str, SpanRow]]:
    """The stored spans (and placeholders) the request's spans and their parents name, by
    trace: looked up only for traces stored before (a new one has none)."""
    old = {t.pk: wanted[tid] for tid, t in traces.items() if not t.fresh}
    ids = sorted({s.span_id for spans in old.values() for s in spans}
                 | {s.parent_id for spans in old.values() for s in spans if s.parent_id})
    out: dict[int, dict[str, SpanRow]] = {}
    empty = ExpressionWrapper(Q(data__isnull=True), output_field=BooleanField())
    for chunk in batched(ids, IN_CHUNK):
        for pk, trace_id, span_id, seq, is_empty in ReceivedSpan.objects.filter(
                trace_id__in=list(old), span_id__in=chunk).values_list(
                "pk", "trace_id", "span_id", "seq", empty):
            out.setdefault(trace_id, {})[span_id] = SpanRow(trace_id, span_id, seq, pk=pk,
                                                            stored=not is_empty)
    return out


@dataclass
class SpanRow:
    """A ReceivedSpan row as the store needs it: one to insert (`pk` None), or one stored,
    without its data (`stored`: with a span's data; else a placeholder's row). A model
    instance costs more to make than the row to write, and a stored span's data (the whole
    span as JSON) is never needed here."""

    trace_id: int
    span_id: str
    seq: int
    data: dict[str, Any] | None = None  # to write
    pk: int | None = None
    stored: bool = False


def insert(rows: list[SpanRow]) -> None:
    """ReceivedSpan rows, one statement per IN_CHUNK (bulk_create builds a model's worth of
    work per row; these are the receiver's most written rows)."""
    if not rows:
        return
    qn = connection.ops.quote_name
    data = json_values(ReceivedSpan._meta.get_field("data"))
    head = (f"INSERT INTO {qn(ReceivedSpan._meta.db_table)} ({qn('trace_id')}, {qn('span_id')}, "
            f"{qn('seq')}, {qn('data')}) VALUES ")
    with connection.cursor() as cursor:
        for chunk in batched(rows, IN_CHUNK):
            params: list[Any] = []
            for row in chunk:
                params += [row.trace_id, row.span_id, row.seq, data(row.data)]
            cursor.execute(head + ", ".join(["(%s, %s, %s, %s)"] * len(chunk)), params)


_SPAN_FIELDS = [f.name for f in dataclasses.fields(Span)]


def stored(span: Span) -> dict[str, Any]:
    """A span as ReceivedSpan.data (whole.span_of reads it back). Shallow: its values are JSON
    already (dataclasses.asdict deep-copies them, ~50 µs a span)."""
    return {f: getattr(span, f) for f in _SPAN_FIELDS}


def _when(ns: int) -> datetime | None:
    try:
        return datetime.fromtimestamp(ns / 1e9, tz=UTC) if ns else None
    except (OverflowError, OSError, ValueError):
        return None
