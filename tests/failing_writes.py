"""Step rows that fail where the writer writes them (agentlab.runs.writer.upsert_steps), as a full
disk would: shared by the recorder's and the honest-endings tests."""

from __future__ import annotations

from django.db import OperationalError

from agentlab.runs import writer


def failing_rows(kind: str, *, times: int | None):
    """agentlab.runs.writer.upsert_steps, except that its first `times` batches holding a step of
    `kind` raise (None: all of them); `.failures` counts them."""
    real = writer.upsert_steps

    def upsert(rows):
        rows = list(rows)  # a generator: looked at here, then handed on whole
        if any(record.kind == kind for _run, record in rows) and (
                times is None or upsert.failures < times):
            upsert.failures += 1
            raise OperationalError("disk I/O error")
        return real(rows)
    upsert.failures = 0
    return upsert
