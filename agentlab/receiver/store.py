"""Received spans -> runs, in the database (called on the writer thread: one transaction a
request, so a trace's spans from two requests never take the same seq).

While a trace is open, each span becomes a step as it arrives: the step of the span it
belongs under if that one came already, else under a *placeholder* step that stands for the
parent until it comes (OTLP sends a span when it ends, so parents come after their children).
Seqs are given in order of arrival. When the root span arrives (or the trace goes quiet:
`close_quiet`), the run is read whole (agentlab/receiver/whole.py). A span that comes again
(an exporter's retry) changes nothing; one that comes after the end reads the run whole again.

A request's traces (or a piece of a big request's: agentlab/receiver/chunks.py) are stored
together — their rows looked up, made and written a statement for all of them, not a
transaction each: a batch of 512 spans often holds a hundred small traces. A trace that
comes whole in one request is read whole from the spans in hand (nobody can be watching a
run that did not exist) before its run and its trace's row are inserted, so each is inserted
as it ends, written once (`_read_first`). One that was open gets its live steps written and
published first, and is read whole by `finish`, a second job on the writer thread, so the
watchers see the last spans before the whole read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import batched
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from agentlab.receiver import held, rows
from agentlab.receiver.models import ReceivedSpan, ReceivedTrace
from agentlab.receiver.whole import Draft, Ending, Event, read_first, read_whole, write_read
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

    def add(self, other: Receipt) -> None:
        """What another piece of the same request did, after this one's."""
        self.events += other.events
        self.ending += other.ending
        self.rejected += other.rejected
        for reason in other.reasons:
            self.warn(reason)

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

    new_rows: list[rows.SpanRow] = field(default_factory=list)
    filled: list[rows.SpanRow] = field(default_factory=list)
    steps: list[tuple[int, StepRecord]] = field(default_factory=list)  # live (run id, step)
    new_steps: dict[int, int] = field(default_factory=dict)  # run id -> rows it adds
    whole: list[Ending] = field(default_factory=list)  # a new trace that came whole (`_take`)
    read: list[Draft] = field(default_factory=list)  # read whole before their rows' insert


def receive(user: Any, project: str, groups: dict[str, list[Span]]) -> Receipt:
    """Store a request's spans (or a piece of them: agentlab/receiver/chunks.py) and show
    them as steps (see the module's docstring)."""
    receipt, batch, arrived = Receipt(), _Batch(), time.time()
    wanted: dict[str, list[Span]] = {}
    for trace_id, spans in groups.items():
        for span in spans:
            _cut_long_values(span, receipt)
        wanted[trace_id.lower()] = spans
    with transaction.atomic():
        traces = rows.opened(user, project, wanted, receipt, _read_first)
        stored = rows.stored_rows(traces, wanted)
        for trace_id, trace in traces.items():
            if (first := _first_read(trace)) is not None:
                _add_read(trace, first, batch, receipt)
                continue
            known = stored.get(trace.pk, {})
            _take(trace, _fresh(trace, wanted[trace_id], known, receipt), known, batch, receipt)
        batch.steps = _latest(batch.steps)
        _write(traces.values(), batch)
        for run_id, step in batch.steps:
            receipt.events.append((run_id, _step_event(step, arrived)))
        # Every new trace that came whole was read before its insert (`_read_first`).
        receipt.events += write_read(batch.read)
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


@dataclass
class _Read:
    """A new trace that came whole, taken and read before its rows were inserted
    (`_read_first`): its span rows (their trace's id to fill in), its run's read, and what
    taking it refused (for the request's receipt, should the trace be the one inserted)."""

    new_rows: list[rows.SpanRow]
    draft: Draft
    receipt: Receipt


def _read_first(trace: ReceivedTrace, spans: list[Span]) -> None:
    """A new trace, before its run and its row are inserted (rows.opened): if it came whole,
    take it and read it whole now, so that both are inserted as they end, each written once.
    Touches nothing but the unsaved trace and run (a retried insert makes them anew)."""
    if not any(rows.is_root(s) for s in spans):
        return  # open: its live steps need its run's id (taken once inserted)
    receipt = Receipt()
    fresh = _fresh(trace, spans, {}, receipt)
    if not any(rows.is_root(s) for s in fresh):
        return  # its root past the run's room for spans: open too
    batch = _Batch()
    _take(trace, fresh, {}, batch, receipt)
    trace.whole_read = _Read(batch.new_rows, read_first(batch.whole[0]), receipt)


def _first_read(trace: ReceivedTrace) -> _Read | None:
    return getattr(trace, "whole_read", None)  # set by `_read_first`, if at all


def _add_read(trace: ReceivedTrace, read: _Read, batch: _Batch, receipt: Receipt) -> None:
    """A trace read first, inserted since: its rows to write, in the request's batch."""
    for row in read.new_rows:
        row.trace_id = trace.pk
    batch.new_rows += read.new_rows
    batch.read.append(read.draft)
    receipt.add(read.receipt)


def _fresh(trace: ReceivedTrace, spans: list[Span], known: dict[str, rows.SpanRow],
           receipt: Receipt) -> list[Span]:
    """The trace's spans not stored yet, once each, as many as its run has room for."""
    fresh: list[Span] = []
    seen: set[str] = set()
    for span in spans:
        row = known.get(span.span_id)
        if row is not None and row.stored or span.span_id in seen:
            continue  # an exporter's retry, or twice in one request: nothing arrives twice
        seen.add(span.span_id)
        fresh.append(span)
    most = settings.AGENTLAB_RECEIVER_MAX_SPANS_PER_RUN
    room = max(most - trace.spans, 0)
    if len(fresh) > room:
        receipt.refuse(len(fresh) - room, f"trace {trace.trace_id} holds the {most:,} spans "
                       "one run may have (AGENTLAB_RECEIVER_MAX_SPANS_PER_RUN)")
        fresh = fresh[:room]
    return fresh


def _take(trace: ReceivedTrace, fresh: list[Span], known: dict[str, rows.SpanRow],
          batch: _Batch, receipt: Receipt) -> None:
    """One trace's new spans (`_fresh`): new rows, live steps (an open trace), or its whole
    read (a trace that came whole)."""
    if not fresh:
        return
    # A trace that came whole: no live steps (nobody can be watching a run that did not exist).
    whole_now = trace.fresh and any(rows.is_root(s) for s in fresh)
    # An ended trace's steps are its whole read's (numbered anew): a late span reads it again.
    live = not whole_now and not trace.done
    taken: list[tuple[int, Span, StepRecord]] = []
    for span in fresh:
        row = known.get(span.span_id)
        parent = None
        if span.parent_id and span.parent_id != span.span_id:
            parent_row = known.get(span.parent_id)
            if parent_row is None:  # a child before its parent: a placeholder holds its place
                parent_row = known[span.parent_id] = rows.SpanRow(
                    trace.pk, span.parent_id, _take_seq(trace))
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
            known[span.span_id] = row = rows.SpanRow(trace.pk, span.span_id, seq)
            batch.new_rows.append(row)
            if live:
                batch.new_steps[trace.run_id] = batch.new_steps.get(trace.run_id, 0) + 1
        elif row.pk is not None:
            batch.filled.append(row)
        row.data = rows.stored(span)
        taken.append((seq, span, step))
        trace.spans += 1
        if rows.is_root(span):
            trace.root_span_id = span.span_id
        if live:
            _live(batch, trace, step, counted=True)
    trace.last_span_at = timezone.now()
    if whole_now:
        trace.done = True
        batch.whole.append(Ending(trace, [span for _seq, span, _step in taken],
                                  {span.span_id: step for _seq, span, step in taken}))
        return
    if live:  # the whole read at its end takes these instead of reading them back
        held.add_on_commit(trace.pk, taken)
    if trace.root_span_id or trace.done:  # the root came, or it came after a quiet close
        receipt.ending.append(trace.pk)  # `finish` marks it done (if it fails: the quiet sweep)


def _latest(steps: list[tuple[int, StepRecord]]) -> list[tuple[int, StepRecord]]:
    """One version of each (run, seq): the last, in the place of the first. A placeholder
    whose span came in the same request is one row to write (an upsert may not touch a row
    twice) and one frame to send, still before the children that came first."""
    at: dict[tuple[int, int], int] = {}
    out: list[tuple[int, StepRecord]] = []
    for run_id, step in steps:
        if (key := (run_id, step.seq)) in at:
            out[at[key]] = (run_id, step)
        else:
            at[key] = len(out)
            out.append((run_id, step))
    return out


def _live(batch: _Batch, trace: ReceivedTrace, step: StepRecord, counted: bool = False) -> None:
    batch.steps.append((trace.run_id, step))
    if not counted:  # a placeholder is a new row too
        batch.new_steps[trace.run_id] = batch.new_steps.get(trace.run_id, 0) + 1


def _write(traces: Any, batch: _Batch) -> None:
    rows.insert(batch.new_rows)
    upsert.update_rows(ReceivedSpan, batch.filled, ["data"])
    for chunk in batched(batch.steps, upsert.ROWS_PER_STATEMENT):
        upsert.execute(upsert.statements(chunk))
    _add_live_totals(batch)
    upsert.update_rows(ReceivedTrace, [t for t in traces if _first_read(t) is None],
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


def _take_seq(trace: ReceivedTrace) -> int:
    seq, trace.next_seq = trace.next_seq, trace.next_seq + 1
    return seq


def _placeholder(row: rows.SpanRow, child: Span) -> StepRecord:
    return StepRecord(seq=row.seq, parent=None, kind="thought", role="agent",
                      name="(span not arrived yet)", status="running",
                      started_at=child.start_ns / 1e9, text=WAITING,
                      meta={"otel.span_id": row.span_id, "placeholder": True})


def _step_event(step: StepRecord, arrived: float) -> dict[str, Any]:
    # version: a placeholder is 1, its span 2 (the page caches a rendering by seq and version).
    # A shallow copy, not to_dict()'s deep one: nothing changes a received step once made
    # (the whole read changes copies of it), and its values are JSON's already.
    return {"type": "run.step", "seq": step.seq, "step": dict(vars(step)),
            "version": 1 if step.meta.get("placeholder") else 2,
            "recorded_at": arrived, "sent_at": time.time()}
