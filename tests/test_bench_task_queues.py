"""`manage.py bench_task_queues procrastinate` on a real PostgreSQL, Redis and worker processes:
the figures of the engine chosen for runs on workers (docs/ARCHITECTURE.md) come out, each
saying what a run would rely on. The figures themselves are not asserted (a benchmark)."""

from __future__ import annotations

import glob
import io
import shutil

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.skipif(
    not (shutil.which("redis-server") and glob.glob("/usr/lib/postgresql/*/bin/initdb")),
    reason="redis-server or PostgreSQL is not installed (scripts/test installs both)")


def test_the_chosen_engine_meets_the_criteria_it_was_chosen_for():
    out = io.StringIO()
    call_command("bench_task_queues", "procrastinate", stdout=out)
    text = out.getvalue()
    rows = {line.split("  ", 1)[0]: line for line in text.splitlines()}
    assert "ran " in rows["durable (deferred, then a worker)"]
    assert "at most 100 at once" in rows["100 jobs of 0.5 s, one worker"]
    assert "the job finished first" in rows["SIGTERM mid-job"]
    assert "started again on another worker after" in rows["SIGKILL mid-job"]
    assert "procrastinate  ■" in text
