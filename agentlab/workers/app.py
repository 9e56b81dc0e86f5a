"""The procrastinate apps of Agent Lab: the queue of runs lives in the project's PostgreSQL.

procrastinate (PyPI, chosen by the measurements in docs/ARCHITECTURE.md "Runs on workers")
keeps its jobs in tables of the same database as the traces (migration 0007 creates them on
PostgreSQL), so a run's row and its job share one server. One job per run: deferred with
`lock` and `queueing_lock` named after the run, so a run is never queued twice nor executed
by two workers at once.

A web process only defers (`deferrer`: a synchronous connection pool, used from a thread);
a worker process opens its own app on its event loop (`worker_app`) and registers the job's
body (agentlab.workers.job).
"""

from __future__ import annotations

import functools
from typing import Any

import procrastinate
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connections

RUN_TASK = "agentlab.execute_run"
QUEUE = "runs"


def conninfo() -> str:
    """The project's database (the test database under tests), as a libpq connection string."""
    params = connections["default"].settings_dict
    if not params["ENGINE"].endswith("postgresql"):
        raise ImproperlyConfigured(
            "AGENTLAB_RUNS_ON=workers needs PostgreSQL (DATABASE_URL=postgres://…): the queue "
            "of runs (procrastinate) lives in the project's database")
    from psycopg.conninfo import make_conninfo

    parts = {"dbname": params["NAME"], "user": params.get("USER") or None,
             "password": params.get("PASSWORD") or None, "host": params.get("HOST") or None,
             "port": str(params["PORT"]) if params.get("PORT") else None}
    return make_conninfo(**{k: v for k, v in parts.items() if v})


def run_lock(run_id: int) -> str:
    return f"agentlab-run-{run_id}"


@functools.cache
def _web_app() -> procrastinate.App:
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(
        conninfo=conninfo(), min_size=1, max_size=4))
    return app.open()


def run_job(app: procrastinate.App, run_id: int) -> Any:
    """The run's job, ready to defer on `app`: never queued twice, never executed twice at once."""
    return app.configure_task(RUN_TASK, queue=QUEUE, lock=run_lock(run_id),
                              queueing_lock=run_lock(run_id))


def defer_run(run_id: int, debug: dict[str, Any]) -> int:
    """Queue the run's job (synchronous: call it from a thread); the job id."""
    return run_job(_web_app(), run_id).defer(run_id=run_id, debug=debug)


def worker_app() -> procrastinate.App:
    """A new app for a worker process (open it on the worker's loop: `open_async`)."""
    from agentlab.workers import job

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(
        conninfo=conninfo(), min_size=2, max_size=max(4, settings.AGENTLAB_WORKER_POOL)))
    app.task(name=RUN_TASK, queue=QUEUE, pass_context=True)(job.execute)
    return app
