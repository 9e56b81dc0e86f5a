"""A received run read whole: its steps become exactly what the file import makes of the same
spans (traces.otel.importer.draft: depth first, by start time; a root AGENT or CHAIN span is
the run itself), with its question, answer, status and totals. Called on the writer thread,
inside the transaction of the request that ended the trace (or of the quiet sweep); a trace
that came whole in one request is read before its run is inserted (`read_first`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from itertools import batched
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Count
from django.utils import timezone

from agentlab.receiver import held
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
    steps: Mapping[str, StepRecord] | None = None  # made of `spans` already, by span id


def read_whole(endings: list[Ending]) -> list[Event]:
    """Each ending trace's run, read whole (see the module's docstring); their status events."""
    if not endings:
        return []
    runs = Run.objects.in_bulk([e.trace.run_id for e in endings])
    drafts = [_draft(e, runs[e.trace.run_id]) for e in endings]
    read = [d for d in drafts if d.steps]
    if read:
        _write_steps(read)
    # A run read whole has its steps; one that could not be read keeps its live ones: count those.
    counts = {d.run.pk: len(d.steps) for d in read}
    if unread := [d.run.pk for d in drafts if not d.steps]:
        counts |= dict(Step.objects.filter(run_id__in=unread).values("run_id")
                       .annotate(n=Count("pk")).values_list("run_id", "n"))
    for d in drafts:
        _settle(d, counts.get(d.run.pk, 0))
    names = sorted({name for d in drafts for name in d.fields})
    upsert.update_rows(Run, [d.run for d in drafts], names)
    return _events(drafts)


def read_first(ending: Ending) -> Draft:
    """A trace that came whole, read before its run is inserted: the run (`ending.trace.run`,
    not saved yet) given its final fields, so that it is inserted as it ends (no UPDATE after);
    its steps written by `write_read` once it has its id."""
    d = _draft(ending, ending.trace.run)
    _settle(d, len(d.steps))  # a new run has no live steps: an unread one has none
    return d


def write_read(drafts: list[Draft]) -> list[Event]:
    """The steps of runs read first (`read_first`), inserted since; their status events."""
    if read := [d for d in drafts if d.steps]:
        _write_steps(read)
    return _events(drafts)


def _settle(d: Draft, step_count: int) -> None:
    d.fields["step_count"] = step_count
    for name, value in d.fields.items():
        setattr(d.run, name, value)


def _events(drafts: list[Draft]) -> list[Event]:
    return [(d.run.pk, {"type": "run.status", "status": d.run.status, "detail": {
        "answer": d.run.final_answer, "error": d.run.error,
        "totals": {k: getattr(d.run, k) for k in RUN_TOTALS if hasattr(d.run, k)}}})
        for d in drafts]


@dataclass
class Draft:
    """A run read whole: its fields (set on `run` once settled) and its steps."""

    run: Run
    fields: dict[str, Any]
    steps: list[StepRecord]
    existing: bool  # the run may have live steps to replace
    live: Mapping[str, StepRecord] | None = None  # its live rows' steps by span id, when held


def _write_steps(drafts: list[Draft]) -> None:
    """The drafts' steps as the runs' rows: a run whose live steps this process held has its
    rows moved to their new seqs in place (`_renumber`) and only the steps that differ
    written; any other run's rows are replaced."""
    plain = [d for d in drafts if d.live is None or not upsert.native()]
    if old := [d.run.pk for d in plain if d.existing]:
        Step.objects.filter(run_id__in=old).delete()
    rows = [(d.run.pk, s) for d in plain for s in d.steps]
    for d in drafts:
        if d.live is not None and upsert.native():
            rows += _renumber(d.run.pk, d.steps, d.live)
    for chunk in batched(rows, upsert.ROWS_PER_STATEMENT):
        upsert.execute(upsert.statements(chunk))


OFFSET = 1_000_000_000  # live seqs move above any real one while they are renumbered
MOVES_PER_STATEMENT = 1000
_COMPARED = [f.name for f in dataclass_fields(StepRecord) if f.name not in ("seq", "parent")]


def _renumber(run_id: int, steps: list[StepRecord], live: Mapping[str, StepRecord],
              ) -> list[tuple[int, StepRecord]]:
    """Renumber a run's live rows to the whole read's seqs and parents in a few statements
    (the whole read numbers depth first; live rows came in order of arrival), delete those
    it has no step for (placeholders of spans that never came); the (run id, step) rows still
    to write: steps that differ from their live row besides seq and parent, or have none."""
    moves: list[int | None] = []
    rest: list[tuple[int, StepRecord]] = []
    for step in steps:
        was = live.get(step.meta.get("otel.span_id", ""))
        if was is not None:
            moves += [was.seq, step.seq, step.parent]
        if was is None or not _same(step, was):
            rest.append((run_id, step))
    qn = connection.ops.quote_name
    table, seq, parent, run = (qn(Step._meta.db_table), qn("seq"), qn("parent"), qn("run_id"))
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET {seq} = {seq} + %s WHERE {run} = %s",
                       [OFFSET, run_id])
        width = 3 * MOVES_PER_STATEMENT
        for start in range(0, len(moves), width):
            chunk = moves[start:start + width]
            values = ", ".join(["(%s, %s, %s)"] * (len(chunk) // 3))
            # VALUES' columns are column1… in SQLite and PostgreSQL alike
            cursor.execute(
                f"UPDATE {table} SET {seq} = CAST(m.column2 AS INTEGER), "
                f"{parent} = CAST(m.column3 AS INTEGER) FROM (VALUES {values}) AS m "
                f"WHERE {table}.{run} = %s AND {table}.{seq} = m.column1 + %s",
                [*chunk, run_id, OFFSET])
        cursor.execute(f"DELETE FROM {table} WHERE {run} = %s AND {seq} >= %s",
                       [run_id, OFFSET])
    return rest


def _same(step: StepRecord, was: StepRecord) -> bool:
    for name in _COMPARED:
        a, b = getattr(step, name), getattr(was, name)
        if a is not b and a != b:
            return False
    return True


def _draft(ending: Ending, run: Run) -> Draft:
    trace = ending.trace
    quiet = not trace.root_span_id
    spans, known = ending.spans, ending.steps
    if spans is None:  # held by this process while the trace was open, or read back
        kept = held.take(trace.pk, trace.spans)
        spans, known = (kept.ordered(), kept.steps) if kept else (_stored_spans(trace), None)
    fields: dict[str, Any] = {}
    steps: list[StepRecord] = []
    error = ""
    if not spans:
        error = "no spans of this trace could be stored"
    else:
        try:
            fields, steps = draft(trace.trace_id, spans, known)
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
    return Draft(run, fields, steps, existing=ending.spans is None,
                 live=known if ending.spans is None else None)


def _stored_spans(trace: ReceivedTrace) -> list[Span]:
    return [span_of(data) for data in ReceivedSpan.objects.filter(
        trace=trace, data__isnull=False).order_by("seq").values_list("data", flat=True)]


def span_of(data: dict[str, Any]) -> Span:
    """A span as stored (store.stored) back as a Span."""
    return Span(**{**data, "events": [tuple(e) for e in data.get("events") or []]})
