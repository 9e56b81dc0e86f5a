"""Writing an imported run without holding the database for long, all or nothing for the user.

SQLite has one writer at a time; a 100,000-step import in one transaction held its lock for
seconds, past other runs' busy timeout ("database is locked" for everyone). So:

1. the run row is created first, owned by the staging account STAGING_USERNAME (inactive, no
   usable password: nobody logs in as it), as `interrupted` with a note in `input` and `error`,
   and this process's worker id: no user sees a half-imported run among their runs, and
   nothing ever executes it;
2. the steps go in chunks of STEP_CHUNK, each its own short transaction (its statement built
   and its values serialised before, outside it: traces.upsert), and after each the import
   pauses about as long as the chunk held the lock, so other writers get in between;
3. one last short transaction hands the run to its owner with its recorded input, status and
   error. Only then does it exist for anyone but staff (who see all runs, and see this one as
   the staging account's "import in progress").

A failure on the way deletes what was written (steps in chunks as well) and re-raises; a
process that dies mid-import leaves a staging run whose worker is dead, which the next process
that starts deletes (`discard_abandoned`, called by traces.startup).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from itertools import batched
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from traces import graph_query, graph_summary, timeline_summary, upsert
from traces.models import Run, Step
from traces.owners import left_by_dead_process, process_id
from traces.schema import Step as StepRecord

log = logging.getLogger(__name__)

STAGING_USERNAME = "agentlab-import"
STEP_CHUNK = 500  # steps per transaction
MAX_PAUSE_S = 0.1  # the pause after a chunk: as long as it took, at most this
DELETE_CHUNK = 2_000
IMPORTING = "Import in progress: this run is being written and belongs to nobody yet."


def write_run(fields: dict[str, Any], steps: list[StepRecord], *, user: Any) -> Run:
    """Create the run (`fields` of Run, final values) with `steps`, owned by `user` only once
    every step is written; nothing of it is left behind if that fails."""
    final = {"input": fields.pop("input"), "status": fields.pop("status"),
             "error": fields.pop("error", ""), "step_count": len(steps)}
    staged = Staged(fields)
    try:
        staged.write(steps)
        row = staged.hand(final, user=user)
    except BaseException:
        discard(staged.pk)
        raise
    summarize(row)
    return row


class Staged:
    """A run being imported (1. to 3. above): its row made now under the staging account,
    its steps written as they come (`write`, any number of times: a big file's import
    writes each part as it reads it), then handed to its owner (`hand`). The caller
    discards it (`discard(staged.pk)`) if anything fails on the way."""

    def __init__(self, fields: dict[str, Any]) -> None:
        with transaction.atomic():
            self.row = Run.objects.create(**fields, user=staging_user(), status="interrupted",
                                          input=IMPORTING, error=IMPORTING,
                                          worker=process_id())
        self.pk: int = self.row.pk

    def write(self, steps: Iterable[StepRecord]) -> None:
        for chunk in batched(steps, STEP_CHUNK):
            prepared = upsert.statements((self.pk, s) for s in chunk)  # CPU, before the lock
            started = time.monotonic()
            with transaction.atomic():
                upsert.execute(prepared)
            time.sleep(min(time.monotonic() - started, MAX_PAUSE_S))

    def hand(self, fields: dict[str, Any], *, user: Any) -> Run:
        """The run given to `user` with its final `fields` (input, status, error, step_count
        at least)."""
        with transaction.atomic():
            handed = Run.objects.filter(pk=self.pk, user=self.row.user_id).update(
                **fields, user=user, worker="")
        if not handed:
            raise RuntimeError("the import was removed while it was being written")
        self.row.refresh_from_db()
        return self.row


def summarize(row: Run) -> None:
    """A long imported run's timeline and graph summed once now, as it is handed over, not
    by the first person to open them."""
    if row.step_count > timeline_summary.SUMMED_FROM:
        timeline_summary.update(row, row.steps.order_by("-seq").values_list(
            "seq", flat=True)[0])
    if graph_summary.summed(row):
        graph_query.summarize(row)


def staging_user() -> Any:
    """The inactive account that owns runs while they are imported (created on first use)."""
    model = get_user_model()
    user, created = model.objects.get_or_create(
        **{model.USERNAME_FIELD: STAGING_USERNAME}, defaults={"is_active": False})
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


def discard(run_id: int) -> None:
    """Delete a staging run and its steps, a chunk per transaction; logged, never raised."""
    try:
        while ids := list(Step.objects.filter(run_id=run_id)
                          .values_list("pk", flat=True)[:DELETE_CHUNK]):
            with transaction.atomic():
                Step.objects.filter(pk__in=ids).delete()
        Run.objects.filter(pk=run_id).delete()
    except Exception:
        log.exception("could not remove the unfinished import (run %s); the next process "
                      "that starts removes it", run_id)


def discard_abandoned() -> int:
    """Staging runs whose importing process is gone are deleted; returns how many."""
    model = get_user_model()
    staging = model.objects.filter(**{model.USERNAME_FIELD: STAGING_USERNAME}).first()
    if staging is None:
        return 0
    left = [run.pk for run in Run.objects.filter(user=staging).only("pk", "worker")
            if left_by_dead_process(run.worker)]
    for run_id in left:
        discard(run_id)
    return len(left)

