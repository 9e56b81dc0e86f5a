"""Received spans -> runs, in the database (called on the writer thread: one transaction a
request, so a trace's spans from two requests never take the same seq).

While a trace is open, each span becomes a step as it arrives: the step of the span it
belongs under if that one came already, else under a *placeholder* step that stands for the
parent until it comes (OTLP sends a span when it ends, so parents come after their children).
Seqs are given in order of arrival. When the root span arrives (or the trace goes quiet:
`close_quiet`), the run is read whole (agentlab/receiver/whole.py). A span that comes again
(an exporter's retry) changes nothing; one that comes after the end reads the run whole again.

A request's traces are stored together — their rows looked up, made and written a statement
for all of them, not a transaction each: a batch of 512 spans often holds a hundred small
traces. A trace that comes whole in one request is read whole from the spans in hand (nobody
can be watching a run that did not exist); one that was open gets its live steps written and
published first, and is read whole by `finish`, a second job on the writer thread, so the
watchers see the last spans before the whole read.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import batched
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from agentlab.receiver.models import ReceivedSpan, ReceivedTrace
from agentlab.receiver.whole import Ending, Event, read_whole
from agentlab.runs.start import received_runs
from traces import upsert
from traces.bundle_values import bad_value
from traces.models import Run
from traces.otel.decode import Span
from traces.otel.steps import step_from_span
from traces.schema import Step as StepRecord

MAX_REASONS = 20  # things one reply's message says (a bad batch must not make a huge reply)
IN_CHUNK = 500  # ids per IN (…) query, well under SQLite's bound-variable limit
WAITING = ("A span whose children arrived first: OTLP sends a span when it ends, so this "
           "step fills in when it does.")


@dataclass
class Receipt:
    """What one request did: the events to publish (persisted already), the traces to read
    whole next (`finish`), and the spans refused."""

    events: list[Event] = field(default_factory=list)
    ending: list[int] = field(default_factory=list)  # ReceivedTrace pks
    rejected: int = 0
    reasons: list[str] = field(default_factory=list)

    def refuse(self, count: int, reason: str) -> None:
        self.rejected += count
        self.warn(reason)

    def warn(self, reason: str) -> None:
        """Say something in the reply's message (at most MAX_REASONS things)."""
        if reason not in self.reasons and len(self.reasons) < MAX_REASONS:
            self.reasons.append(reason)


@dataclass
class _Batch:
    """What the request writes, for all its traces at once."""

    new_rows: list[ReceivedSpan] = field(default_factory=list)
    filled: list[ReceivedSpan] = field(default_factory=list)
    steps: list[tuple[int, StepRecord]] = field(default_factory=list)  # live (run id, step)
    new_steps: dict[int, int] = field(default_factory=dict)  # run id -> rows it adds
    whole: list[Ending] = field(default_factory=list)


def receive(user: Any, project: str, groups: dict[str, list[Span]]) -> Receipt:
    """Store the request's spans and show them as steps (see the module's docstring)."""
    receipt, batch, arrived = Receipt(), _Batch(), time.time()
    most = settings.AGENTLAB_RECEIVER_MAX_TRACES_PER_REQUEST
    wanted: dict[str, list[Span]] = {}
    for n, (trace_id, spans) in enumerate(groups.items()):
        if n >= most:
            receipt.refuse(len(spans), f"a request may hold the spans of {most:,} traces "
                                       "(AGENTLAB_RECEIVER_MAX_TRACES_PER_REQUEST)")
            continue
        for span in spans:
            _cut_long_values(span, receipt)
        wanted[trace_id.lower()] = spans
    with transaction.atomic():
        traces = _traces(user, project, wanted, receipt)
        rows = _rows(traces, wanted)
        for trace_id, trace in traces.items():
            _take(trace, wanted[trace_id], rows.get(trace.pk, {}), batch, receipt)
        _write(traces.values(), batch)
        for run_id, step in batch.steps:
            receipt.events.append((run_id, _step_event(step, arrived)))
        receipt.events += read_whole(batch.whole)
    return receipt


def finish(ending: list[int]) -> list[Event]:
    """Read whole the traces a request ended that had been open (their status events)."""
    with transaction.atomic():
        traces = list(ReceivedTrace.objects.select_for_update().filter(pk__in=ending))
        ReceivedTrace.objects.filter(pk__in=ending).update(done=True)
        return read_whole([Ending(t) for t in traces])


def close_quiet(now: datetime | None = None) -> list[Event]:
    """Open traces whose last span came more than AGENTLAB_RECEIVER_QUIET_S ago end
    interrupted with what they have; their status events (persisted)."""
    cutoff = (now or timezone.now()) - timedelta(seconds=settings.AGENTLAB_RECEIVER_QUIET_S)
    events: list[Event] = []
    for pk in ReceivedTrace.objects.filter(done=False, last_span_at__lt=cutoff).values_list(
            "pk", flat=True):
        with transaction.atomic():
            if not ReceivedTrace.objects.filter(pk=pk, done=False).update(done=True):
                continue  # another process closed it meanwhile
            events += read_whole([Ending(ReceivedTrace.objects.get(pk=pk))])
    return events


def _cut_long_values(span: Span, receipt: Receipt) -> None:
    """Text attributes past AGENTLAB_RECEIVER_MAX_VALUE_CHARS are kept cut there, the span
    saying which (meta `otel.cut`), and the exporter told in the reply's message."""
    most = settings.AGENTLAB_RECEIVER_MAX_VALUE_CHARS
    cut = [key for key, value in span.attributes.items()
           if isinstance(value, str) and len(value) > most]
    for key in cut:
        span.attributes[key] = span.attributes[key][:most]
    if cut:
        span.attributes["otel.cut"] = ", ".join(cut)
        receipt.warn(f"span {span.span_id}: {', '.join(cut)} cut at {most:,} characters "
                     "(AGENTLAB_RECEIVER_MAX_VALUE_CHARS)")


def _traces(user: Any, project: str, wanted: dict[str, list[Span]],
            receipt: Receipt) -> dict[str, ReceivedTrace]:
    """The request's traces by id, locked for this transaction; the new ones made with their
    runs (none past the user's limit of open traces)."""
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
    if limit:
        open_now = ReceivedTrace.objects.filter(user=user, done=False).count()
        # A trace that comes whole (its root in hand) is never open; count the others.
        for trace_id in [t for t in new if not any(_is_root(s) for s in wanted[t])]:
            if open_now >= limit:
                new.remove(trace_id)
                receipt.refuse(len(wanted[trace_id]), f"{limit:,} traces are open (no root "
                               "span yet) for this user, the most one may have "
                               "(AGENTLAB_RECEIVER_MAX_OPEN_TRACES)")
            open_now += 1
    try:
        with transaction.atomic():  # a savepoint: another request may make one first
            found |= _make(user, project, {t: wanted[t] for t in new})
    except IntegrityError:  # then one at a time, each taking the one made meanwhile
        for trace_id in new:
            try:
                with transaction.atomic():
                    found |= _make(user, project, {trace_id: wanted[trace_id]})
            except IntegrityError:
                trace = ReceivedTrace.objects.select_for_update().get(user=user,
                                                                      trace_id=trace_id)
                trace.fresh = False
                found[trace_id] = trace
    return found


def _make(user: Any, project: str, wanted: dict[str, list[Span]]) -> dict[str, ReceivedTrace]:
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
    made = ReceivedTrace.objects.bulk_create(
        ReceivedTrace(run=run, user=user, trace_id=trace_id, project=p, last_span_at=now)
        for run, trace_id, p in zip(runs, wanted, projects, strict=True))
    for trace in made:
        trace.fresh = True
    return {t.trace_id: t for t in made}


def _rows(traces: dict[str, ReceivedTrace],
          wanted: dict[str, list[Span]]) -> dict[int, dict[str, ReceivedSpan]]:
    """The stored spans (and placeholders) the request's spans and their parents name, by
    trace: looked up only for traces stored before (a new one has none)."""
    old = {t.pk: wanted[tid] for tid, t in traces.items() if not t.fresh}
    ids = sorted({s.span_id for spans in old.values() for s in spans}
                 | {s.parent_id for spans in old.values() for s in spans if s.parent_id})
    out: dict[int, dict[str, ReceivedSpan]] = {}
    for chunk in batched(ids, IN_CHUNK):
        for row in ReceivedSpan.objects.filter(trace_id__in=list(old), span_id__in=chunk):
            out.setdefault(row.trace_id, {})[row.span_id] = row
    return out


def _take(trace: ReceivedTrace, spans: list[Span], rows: dict[str, ReceivedSpan],
          batch: _Batch, receipt: Receipt) -> None:
    """One trace's spans: new rows, live steps (an open trace), or its whole read (a trace
    that came whole)."""
    fresh: list[Span] = []
    seen: set[str] = set()
    for span in spans:
        row = rows.get(span.span_id)
        if row is not None and row.data is not None or span.span_id in seen:
            continue  # an exporter's retry, or twice in one request: nothing arrives twice
        seen.add(span.span_id)
        fresh.append(span)
    most = settings.AGENTLAB_RECEIVER_MAX_SPANS_PER_RUN
    room = max(most - trace.spans, 0)
    if len(fresh) > room:
        receipt.refuse(len(fresh) - room, f"trace {trace.trace_id} holds the {most:,} spans "
                       "one run may have (AGENTLAB_RECEIVER_MAX_SPANS_PER_RUN)")
        fresh = fresh[:room]
    if not fresh:
        return
    whole_now = trace.fresh and any(_is_root(s) for s in fresh)  # came whole: no live steps
    # An ended trace's steps are its whole read's (numbered anew): a late span reads it again.
    live = not whole_now and not trace.done
    taken: list[Span] = []
    for span in fresh:
        row = rows.get(span.span_id)
        parent = None
        if span.parent_id and span.parent_id != span.span_id:
            parent_row = rows.get(span.parent_id)
            if parent_row is None:  # a child before its parent: a placeholder holds its place
                parent_row = rows[span.parent_id] = ReceivedSpan(
                    trace=trace, span_id=span.parent_id, seq=_take_seq(trace), data=None)
                batch.new_rows.append(parent_row)
                if live:
                    _live(batch, trace, _placeholder(parent_row, span))
            parent = parent_row.seq
        seq = row.seq if row is not None else _take_seq(trace)
        step = step_from_span(span, seq, parent)
        if (bad := bad_value([step.input, step.output, step.meta])) is not None:
            receipt.refuse(1, f"span {span.span_id}: {bad[1]}")
            continue
        if row is None:
            rows[span.span_id] = row = ReceivedSpan(trace=trace, span_id=span.span_id, seq=seq)
            batch.new_rows.append(row)
            if live:
                batch.new_steps[trace.run_id] = batch.new_steps.get(trace.run_id, 0) + 1
        elif row.pk is not None:
            batch.filled.append(row)
        row.data = stored(span)
        taken.append(span)
        trace.spans += 1
        if _is_root(span):
            trace.root_span_id = span.span_id
        if live:
            _live(batch, trace, step, counted=True)
    trace.last_span_at = timezone.now()
    if whole_now:
        trace.done = True
        batch.whole.append(Ending(trace, taken))
    elif trace.root_span_id or trace.done:  # the root came, or it came after a quiet close
        receipt.ending.append(trace.pk)  # `finish` marks it done (if it fails: the quiet sweep)


def _live(batch: _Batch, trace: ReceivedTrace, step: StepRecord, counted: bool = False) -> None:
    batch.steps.append((trace.run_id, step))
    if not counted:  # a placeholder is a new row too
        batch.new_steps[trace.run_id] = batch.new_steps.get(trace.run_id, 0) + 1


def _write(traces: Any, batch: _Batch) -> None:
    _insert(batch.new_rows)
    upsert.update_rows(ReceivedSpan, batch.filled, ["data"])
    for chunk in batched(batch.steps, upsert.ROWS_PER_STATEMENT):
        upsert.execute(upsert.statements(chunk))
    _add_live_totals(batch)
    upsert.update_rows(ReceivedTrace, list(traces),
                       ["next_seq", "spans", "root_span_id", "last_span_at", "done"])


def _add_live_totals(batch: _Batch) -> None:
    """The live runs' counts so far, one statement for all (the whole read sets them exactly)."""
    totals: dict[int, list[float]] = {}
    for run_id, step in batch.steps:
        t = totals.setdefault(run_id, [0, 0, 0, 0, 0.0])
        if step.kind == "llm":
            t[0] += 1
            t[2] += step.tokens_in
            t[3] += step.tokens_out
            t[4] += step.cost_usd
        elif step.kind == "tool":
            t[1] += 1
    if not totals:
        return
    qn = connection.ops.quote_name
    columns = ("step_count", "llm_calls", "tool_calls", "tokens_in", "tokens_out", "cost_usd")
    sets = ", ".join(f"{qn(c)} = {qn(c)} + %s" for c in columns)
    with connection.cursor() as cursor:
        cursor.executemany(
            f"UPDATE {qn(Run._meta.db_table)} SET {sets} WHERE {qn('id')} = %s",
            [(batch.new_steps.get(run_id, 0), *t, run_id) for run_id, t in totals.items()])


def _insert(rows: list[ReceivedSpan]) -> None:
    """ReceivedSpan rows, one statement per IN_CHUNK (bulk_create builds a model's worth of
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


def _is_root(span: Span) -> bool:
    return not span.parent_id or span.parent_id == span.span_id


def _take_seq(trace: ReceivedTrace) -> int:
    seq, trace.next_seq = trace.next_seq, trace.next_seq + 1
    return seq


def _placeholder(row: ReceivedSpan, child: Span) -> StepRecord:
    return StepRecord(seq=row.seq, parent=None, kind="thought", role="agent",
                      name="(span not arrived yet)", status="running",
                      started_at=child.start_ns / 1e9, text=WAITING,
                      meta={"otel.span_id": row.span_id, "placeholder": True})


_SPAN_FIELDS = [f.name for f in dataclasses.fields(Span)]


def stored(span: Span) -> dict[str, Any]:
    """A span as ReceivedSpan.data (whole.span_of reads it back). Shallow: its values are JSON
    already (dataclasses.asdict deep-copies them, ~50 µs a span)."""
    return {f: getattr(span, f) for f in _SPAN_FIELDS}


def _step_event(step: StepRecord, arrived: float) -> dict[str, Any]:
    # version: a placeholder is 1, its span 2 (the page caches a rendering by seq and version).
    return {"type": "run.step", "seq": step.seq, "step": step.to_dict(),
            "version": 1 if step.meta.get("placeholder") else 2,
            "recorded_at": arrived, "sent_at": time.time()}


def _when(ns: int) -> datetime | None:
    try:
        return datetime.fromtimestamp(ns / 1e9, tz=UTC) if ns else None
    except (OverflowError, OSError, ValueError):
        return None
