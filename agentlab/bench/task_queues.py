"""The finalists for running runs on workers (issue 20), measured by `manage.py bench_task_queues`.

Each queue gets the same probe job: it appends "start" and "end" events (job key, worker pid,
time) to a shared file, sleeping in between as a run waits on its model. A worker is a real
process started as `python -m agentlab.bench.task_queues worker ENGINE CONCURRENCY`, its servers
and files named by AGENTLAB_BENCH_* variables; the measuring side reads the events file only,
so both queues are timed by the same clock and nothing of theirs.

- procrastinate: PostgreSQL; workers heartbeat, and a worker retries the jobs of workers whose
  heartbeat is older than TAKEOVER_S (procrastinate's `get_stalled_jobs` + `retry_job`, run by
  each worker every second, as its docs recommend doing periodically).
- arq: Redis; a job in progress holds a key that expires `job_timeout + 10 s` after it
  started, with no heartbeat: the takeover waits for the longest time a run may take.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

TAKEOVER_S = 5.0  # procrastinate: a worker silent this long has its jobs taken over
HEARTBEAT_S = 1.0
ARQ_JOB_TIMEOUT_S = 20  # arq: the longest a job may run; its takeover is this + 10 s


def _env(name: str) -> str:
    return os.environ[f"AGENTLAB_BENCH_{name}"]


def record(key: str, event: str) -> None:
    """One event line, appended whole (O_APPEND: lines of several processes never mix)."""
    line = json.dumps({"key": key, "event": event, "pid": os.getpid(), "t": time.time()})
    fd = os.open(_env("EVENTS"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


async def probe(key: str, seconds: float) -> None:
    record(key, "start")
    await asyncio.sleep(seconds)
    record(key, "end")


def read_events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ---------------------------------------------------------------------------- procrastinate


def procrastinate_app() -> Any:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=_env("PG")))

    @app.task(name="probe")
    async def probe_task(key: str, seconds: float) -> None:
        await probe(key, seconds)

    return app


async def procrastinate_prepare() -> None:
    app = procrastinate_app()
    async with app.open_async():
        await app.schema_manager.apply_schema_async()


async def procrastinate_defer(jobs: list[tuple[str, float]]) -> None:
    app = procrastinate_app()
    async with app.open_async():
        task = app.tasks["probe"]
        await task.batch_defer_async(*({"key": k, "seconds": s} for k, s in jobs))


async def _take_over_stalled(app: Any) -> None:
    while True:
        await asyncio.sleep(1)
        for job in await app.job_manager.get_stalled_jobs(seconds_since_heartbeat=TAKEOVER_S):
            await app.job_manager.retry_job(job)


async def procrastinate_worker(concurrency: int) -> None:
    app = procrastinate_app()
    async with app.open_async():
        sweeper = asyncio.create_task(_take_over_stalled(app))
        try:
            await app.run_worker_async(
                concurrency=concurrency, update_heartbeat_interval=HEARTBEAT_S,
                stalled_worker_timeout=TAKEOVER_S, fetch_job_polling_interval=0.5,
                shutdown_graceful_timeout=30)
        finally:
            sweeper.cancel()


# ---------------------------------------------------------------------------------- arq


def _arq_settings() -> Any:
    from arq.connections import RedisSettings

    return RedisSettings.from_dsn(_env("REDIS"))


async def arq_prepare() -> None:
    return None


async def arq_defer(jobs: list[tuple[str, float]]) -> None:
    from arq import create_pool

    pool = await create_pool(_arq_settings())
    try:
        for key, seconds in jobs:
            await pool.enqueue_job("arq_probe", key, seconds)
    finally:
        await pool.aclose()


async def arq_probe(ctx: dict[str, Any], key: str, seconds: float) -> None:
    await probe(key, seconds)


async def arq_worker(concurrency: int) -> None:
    from arq.worker import Worker

    worker = Worker(functions=[arq_probe], redis_settings=_arq_settings(), max_jobs=concurrency,
                    job_timeout=ARQ_JOB_TIMEOUT_S, poll_delay=0.5, handle_signals=True)
    await worker.async_run()


QUEUES = {
    "procrastinate": (procrastinate_prepare, procrastinate_defer, procrastinate_worker),
    "arq": (arq_prepare, arq_defer, arq_worker),
}


def main(argv: list[str]) -> None:
    if argv[:1] != ["worker"] or len(argv) != 3:
        raise SystemExit("usage: python -m agentlab.bench.task_queues worker ENGINE CONCURRENCY")
    _, queue, concurrency = argv
    asyncio.run(QUEUES[queue][2](int(concurrency)))


if __name__ == "__main__":
    main(sys.argv[1:])
