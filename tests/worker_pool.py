"""A pool of `manage.py worker` processes on this test's PostgreSQL database and Redis, for the
runs-on-workers tests (tests/test_workers.py, tests/browser/test_on_workers.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from asgiref.sync import sync_to_async
from django.db import connection

from agentlab.bench.servers import database_url
from tests.waiting import await_until
from traces.models import Run
from traces.owners import WORKER_PREFIX, parse_process_id

ROOT = Path(__file__).resolve().parent.parent
TAKEOVER_S = 3  # AGENTLAB_TAKEOVER_S of the workers: a run whose worker is gone is taken over


class Workers:
    """`manage.py worker` processes on this test's database and Redis."""

    def __init__(self, entry: tuple[str, ...] = ("manage.py", "worker")) -> None:
        self.entry = entry  # what the interpreter runs: the command, or a module (-m) like it
        self.procs: list[subprocess.Popen[bytes]] = []
        self.env = {**os.environ, "DATABASE_URL": database_url(connection.settings_dict),
                    "AGENTLAB_RUNS_ON": "workers", "AGENTLAB_TAKEOVER_S": str(TAKEOVER_S),
                    "AGENTLAB_WORKER_GRACE_S": "60", "PYTHONUNBUFFERED": "1"}

    def start(self, count: int = 1) -> list[subprocess.Popen[bytes]]:
        new = [subprocess.Popen([sys.executable, *self.entry, "--concurrency", "20"],
                                cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE) for _ in range(count)]
        self.procs += new
        return new

    async def ready(self, count: int) -> None:
        """Until `count` workers have registered with the queue (they heartbeat from then)."""
        async def enough() -> bool:
            return await sync_to_async(self.registered)() >= count

        await await_until(enough, timeout=60, message=f"{count} workers registered")

    def registered(self) -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM procrastinate_workers")
            return cursor.fetchone()[0]

    def holder(self, run: Run) -> subprocess.Popen[bytes]:
        run.refresh_from_db()
        assert run.worker.startswith(WORKER_PREFIX), run.worker
        # "engine:<process id>#<claim>": the claim tells one execution of the run from another
        identity = parse_process_id(run.worker.removeprefix(WORKER_PREFIX).partition("#")[0])
        assert identity is not None
        return next(p for p in self.procs if p.pid == identity.pid)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            if proc.stderr is not None:  # shown by pytest when the test failed
                print(f"worker {proc.pid}:", proc.stderr.read().decode()[-3000:])
                proc.stderr.close()
