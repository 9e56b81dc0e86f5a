"""Step rows written as one statement: `INSERT … ON CONFLICT (run, seq) DO UPDATE`.

Why not `bulk_create(update_conflicts=True)`: the ORM builds and compiles that statement anew
for every batch, ~1.1 ms of CPU for one row against ~0.17 ms for this (measured), and the
recorder's writer runs it for every step a run records. Values still go through each field's
`get_db_prep_save`, so JSON and datetimes are stored exactly as the ORM stores them. SQLite and
PostgreSQL share the syntax; any other database gets the ORM's statement.

On PostgreSQL the same statement also adds the new rows to their runs' `step_count`
(`counting=True`: a data-modifying WITH; a row the upsert inserted has `xmax = 0`, one it
updated has not): one round trip per batch of steps instead of four (BEGIN, the upsert, the
counts, COMMIT), which was most of the SQL a worker's step cost (`bench_live --calls`).

A row may be *fenced* (a worker's run, agentlab.workers): written only while `Run.worker` still
holds the owner given with it. Its run id is then read from the run's row in the same
statement, `(SELECT id … WHERE worker = owner FOR KEY SHARE)`: a run taken over by another
worker meanwhile gives NULL, and the statement fails on the column's NOT NULL instead of
writing a step the new owner executes (the writer tells the two failures apart). The lock
orders the write against the takeover's claim (`SELECT … FOR UPDATE` of the same row): either
the row is written first and the new owner's plan sees it, or it is not written at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from functools import cache
from typing import Any

from django.db import connection
from django.db.models import Case, F, Value, When

from traces.models import Run, Step
from traces.schema import Step as StepRecord

FIELDS = [f for f in Step._meta.concrete_fields if f.name != "id"]
UPDATE_FIELDS = [f.name for f in FIELDS if f.name not in ("run", "seq")]
KEY = ("run_id", "seq")
ROWS_PER_STATEMENT = 500  # well under SQLite's limit of bound variables


def native() -> bool:
    return connection.vendor in ("sqlite", "postgresql")


@cache
def _insert_head(vendor: str) -> tuple[str, str, str]:
    qn = connection.ops.quote_name
    columns = [f.column for f in FIELDS]
    head = f"INSERT INTO {qn(Step._meta.db_table)} ({', '.join(map(qn, columns))}) VALUES "
    row = f"({', '.join(['%s'] * len(columns))})"
    tail = (f" ON CONFLICT ({', '.join(map(qn, KEY))}) DO UPDATE SET "
            + ", ".join(f"{qn(c)} = excluded.{qn(c)}" for c in columns if c not in KEY))
    return head, row, tail


@cache
def _fenced_row(vendor: str) -> str:
    """A row whose run id is its run's own, only while `Run.worker` is the given owner."""
    qn = connection.ops.quote_name
    lock = " FOR KEY SHARE" if vendor == "postgresql" else ""
    run = (f"(SELECT {qn('id')} FROM {qn(Run._meta.db_table)} WHERE {qn('id')} = %s "
           f"AND {qn('worker')} = %s{lock})")
    return f"({', '.join(run if f.name == 'run' else '%s' for f in FIELDS)})"


def upsert_steps(rows: Iterable[tuple[int, StepRecord]],
                 fences: Sequence[str | None] | None = None) -> bool:
    """Insert or replace each (run id, step) row, keyed by run and seq; True when the new
    rows were also counted on their runs (PostgreSQL), False when the caller counts them
    (`add_step_counts`). `fences[i]`, when given and not None: row i is written only while
    its run's `Run.worker` is that owner (else the statement fails, see above)."""
    counting = counts_in_statement()
    execute(statements(rows, counting=counting, fences=fences))
    return counting


def counts_in_statement() -> bool:
    return connection.vendor == "postgresql"


Statement = tuple[str, list[Any]] | list[Step]


def statements(rows: Iterable[tuple[int, StepRecord]], *, counting: bool = False,
               fences: Sequence[str | None] | None = None) -> list[Statement]:
    """The statements that upsert the rows, their values already prepared: the CPU work,
    which needs no transaction (the bundle importer does it before taking the write lock).
    `counting` (PostgreSQL only): each statement also adds its new rows to `step_count`.
    `fences`: see `upsert_steps` (SQLite and PostgreSQL only)."""
    pairs = list(rows)
    if not pairs:
        return []
    if not native():
        return [[Step.from_record(run_id, record) for run_id, record in pairs]]
    owners = list(fences) if fences is not None else [None] * len(pairs)
    head, row, tail = _insert_head(connection.vendor)
    fenced = _fenced_row(connection.vendor)
    prepare = _preparers()
    out: list[Statement] = []
    for start in range(0, len(pairs), ROWS_PER_STATEMENT):
        chunk = pairs[start:start + ROWS_PER_STATEMENT]
        chunk_owners = owners[start:start + ROWS_PER_STATEMENT]
        params: list[Any] = [p(run_id, record) for run_id, record in chunk for p in prepare]
        if any(owner is not None for owner in chunk_owners):
            params = _with_owners(params, chunk_owners)
        sql = head + ", ".join(row if owner is None else fenced for owner in chunk_owners) + tail
        out.append((_counted(sql) if counting else sql, params))
    return out


def _preparers() -> list[Any]:
    """Per column, a function (run id, step record) -> its value as the ORM would store it:
    what `Step.from_record` sets, through the field's own `get_db_prep_save` where the
    database form differs (JSON, dates); the rest are the record's values as they are. No
    model instance is built: for a batch of rows that was most of the CPU."""
    out: list[Any] = []
    # The connection's operations looked up once, not per value: `connection` is a proxy
    # to this thread's connection (~1 µs a look-up, ten values a row).
    adapt_date = connection.ops.adapt_datetimefield_value
    for f in FIELDS:
        if f.name == "run":
            out.append(lambda run_id, _r: run_id)
        elif f.name == "started_at":  # aware: what the field's own preparation comes to
            out.append(lambda _id, r: adapt_date(datetime.fromtimestamp(r.started_at, tz=UTC)))
        elif f.name == "meta":
            to_json = json_values(f)
            out.append(lambda _id, r, j=to_json: j(r.meta or {}))
        elif f.get_internal_type() == "JSONField":
            to_json = json_values(f)
            out.append(lambda _id, r, name=f.name, j=to_json: j(getattr(r, name)))
        else:
            out.append(lambda _id, r, name=f.name: getattr(r, name))
    return out


def json_values(field: Any) -> Any:
    """value -> a JSONField's value as `get_db_prep_save` stores it (None stays NULL),
    without the field's layers of preparation (a few µs a value, for thousands of values a
    request), the connection's operations looked up once."""
    adapt, encoder = connection.ops.adapt_json_value, field.encoder
    return lambda value: None if value is None else adapt(value, encoder)


_RUN_AT = next(i for i, f in enumerate(FIELDS) if f.name == "run")


def _with_owners(params: list[Any], owners: Sequence[str | None]) -> list[Any]:
    """A fenced row's values with its owner after its run id (as `_fenced_row` reads them)."""
    out: list[Any] = []
    width = len(FIELDS)
    for i, owner in enumerate(owners):
        values = params[i * width:(i + 1) * width]
        if owner is not None:
            values.insert(_RUN_AT + 1, owner)
        out += values
    return out


def _counted(upsert: str) -> str:
    qn = connection.ops.quote_name
    run, step_count = qn(Run._meta.db_table), qn("step_count")
    return (f"WITH written AS ({upsert} RETURNING {qn('run_id')}, (xmax = 0) AS inserted) "
            f"UPDATE {run} SET {step_count} = {run}.{step_count} + new.n "
            f"FROM (SELECT {qn('run_id')}, count(*) AS n FROM written WHERE inserted "
            f"GROUP BY {qn('run_id')}) AS new WHERE {run}.{qn('id')} = new.{qn('run_id')}")


def execute(prepared: list[Statement]) -> None:
    """Run what `statements` made."""
    with connection.cursor() as cursor:
        for statement in prepared:
            if isinstance(statement, list):  # not SQLite or PostgreSQL: the ORM's statement
                Step.objects.bulk_create(statement, update_conflicts=True,
                                         unique_fields=["run", "seq"],
                                         update_fields=UPDATE_FIELDS)
            else:
                cursor.execute(*statement)


def add_step_counts(counts: Mapping[int, int]) -> None:
    """Run.step_count += counts[run id], in one statement."""
    if not counts:
        return
    if not native():
        Run.objects.filter(pk__in=counts).update(step_count=F("step_count") + Case(
            *(When(pk=run_id, then=Value(n)) for run_id, n in counts.items()), default=Value(0)))
        return
    qn = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.executemany(
            f"UPDATE {qn(Run._meta.db_table)} SET {qn('step_count')} = {qn('step_count')} + %s "
            f"WHERE {qn('id')} = %s", [(n, run_id) for run_id, n in counts.items()])


def insert_rows(model: Any, objects: Sequence[Any]) -> list[Any]:
    """`objects` (new instances of `model`) inserted as `bulk_create` inserts them — each
    field's `pre_save` and `get_db_prep_save`, the new ids read back in order with RETURNING
    — in one prepared statement per chunk: `bulk_create` compiles a placeholder per field
    and row, ~0.15 ms a row of a wide model such as Run, when a request opens a thousand."""
    objs = list(objects)
    if not objs or not native():
        return model.objects.bulk_create(objs)
    qn = connection.ops.quote_name
    pk = model._meta.pk
    fields = [f for f in model._meta.concrete_fields if f is not pk]
    head = (f"INSERT INTO {qn(model._meta.db_table)} ({', '.join(qn(f.column) for f in fields)})"
            " VALUES ")
    row = f"({', '.join(['%s'] * len(fields))})"
    with connection.cursor() as cursor:
        for start in range(0, len(objs), ROWS_PER_STATEMENT):
            chunk = objs[start:start + ROWS_PER_STATEMENT]
            params = [f.get_db_prep_save(f.pre_save(obj, True), connection)
                      for obj in chunk for f in fields]
            cursor.execute(f"{head}{', '.join([row] * len(chunk))} RETURNING {qn(pk.column)}",
                           params)
            for obj, (new_id,) in zip(chunk, cursor.fetchall(), strict=True):
                obj.pk = new_id
                obj._state.adding, obj._state.db = False, connection.alias
    return objs


def update_rows(model: Any, objects: Sequence[Any], names: Sequence[str]) -> None:
    """`UPDATE … SET <names> WHERE id = …` for each of `objects` (saved rows of `model`), their
    values as the ORM would store them: one executemany. `bulk_update` builds a CASE of Q
    objects per row and field, most of the CPU when a request updates a thousand rows."""
    if not objects:
        return
    qn = connection.ops.quote_name
    fields = [model._meta.get_field(name) for name in names]
    sets = ", ".join(f"{qn(f.column)} = %s" for f in fields)
    sql = f"UPDATE {qn(model._meta.db_table)} SET {sets} WHERE {qn(model._meta.pk.column)} = %s"
    with connection.cursor() as cursor:
        cursor.executemany(sql, [
            [f.get_db_prep_save(getattr(obj, f.attname), connection) for f in fields] + [obj.pk]
            for obj in objects])
