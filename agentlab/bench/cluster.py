"""The processes `manage.py bench_live` measures, for one profile.

- `web`: the embedded default. One daphne process executes the runs it serves, on a fresh
  SQLite file; the channel layer is in memory.
- `scale`: runs on workers. A throw-away PostgreSQL and Redis (Debian's, agentlab/bench/
  servers.py), N daphne processes (the sockets are spread over them) and M `manage.py worker`
  processes (AGENTLAB_RUNS_ON=workers) that execute the runs.

CPU is read from /proc for every process of the profile: the app's own (daphne and workers)
and, for the scale profile, PostgreSQL's (the postmaster with its backends, those that ended
included) and Redis's, reported apart.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError

from agentlab.bench.servers import PostgresServer, RedisServer, free_port
from traces.owners import end_process

PROFILES = ("web", "scale")


def process_cpu_ms(pid: int, *, reaped_children: bool = False) -> float | None:
    """User + system CPU of a process so far, in ms (Linux /proc; None elsewhere); with
    `reaped_children`, also that of its children that ended (PostgreSQL's backends)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    ticks = int(fields[11]) + int(fields[12])
    if reaped_children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks * 1000 / os.sysconf("SC_CLK_TCK")


def machine_cpu_ms() -> float | None:
    """CPU every process of the machine has used so far (all cores, /proc/stat), in ms: the
    bench's own browser stand-in and model server included, which share the cores with the
    app. None where there is no /proc."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except (OSError, IndexError):
        return None
    ticks = [int(f) for f in fields]
    busy = sum(ticks) - ticks[3] - (ticks[4] if len(ticks) > 4 else 0)  # less idle, iowait
    return busy * 1000 / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


def wait_for(check: Any, what: str, timeout: float, proc: subprocess.Popen | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise CommandError(f"{what} exited with code {proc.returncode}")
        try:
            if result := check():
                return result
        except OSError:
            pass
        time.sleep(0.1)
    raise CommandError(f"{what} did not come up within {timeout:g} s")


@dataclass
class Cluster:
    profile: str
    web: int = 1
    workers: int = 0
    env: dict[str, str] = field(default_factory=dict)
    ports: list[int] = field(default_factory=list)
    app_pids: list[int] = field(default_factory=list)  # daphne and worker processes
    postgres: PostgresServer | None = None
    redis: RedisServer | None = None

    def cpu_ms(self) -> dict[str, float]:
        """CPU so far: the app's processes, and the servers' (scale profile)."""
        app = sum(process_cpu_ms(pid) or 0.0 for pid in self.app_pids)
        servers = 0.0
        if self.postgres is not None and self.postgres.folder is not None:
            pid_file = self.postgres.folder / "data" / "postmaster.pid"
            first = pid_file.read_text().split()[0] if pid_file.exists() else ""
            if first.isdigit():
                master = int(first)
                servers += process_cpu_ms(master, reaped_children=True) or 0.0
                servers += sum(process_cpu_ms(c) or 0.0 for c in children(master))
        if self.redis is not None and self.redis.process is not None:
            servers += process_cpu_ms(self.redis.process.pid) or 0.0
        return {"app": app, "servers": servers, "machine": machine_cpu_ms() or 0.0}

    def calls(self) -> Counter[str]:
        """What the servers were asked so far, by name: the statements PostgreSQL ran
        (pg_stat_statements, normalized), the connections it opened, and the commands Redis
        ran (INFO commandstats)."""
        import psycopg
        import redis

        seen: Counter[str] = Counter()
        if self.postgres is not None and self.postgres.statements:
            url = self.postgres.url.replace("postgres://", "postgresql://")
            with psycopg.connect(url) as conn:
                for query, calls in conn.execute("SELECT query, calls FROM pg_stat_statements"):
                    seen["sql   " + " ".join(query.split())[:110]] += calls
                row = conn.execute("SELECT sum(sessions) FROM pg_stat_database").fetchone()
                seen["PostgreSQL connections opened"] += int(row[0] or 0) if row else 0
        if self.redis is not None:
            client = redis.Redis.from_url(self.redis.url)
            try:
                for name, stats in client.info("commandstats").items():
                    seen["redis " + name.removeprefix("cmdstat_")] += stats["calls"]
            finally:
                client.close()
        return seen


def child_env(tmp: Path) -> dict[str, str]:
    env = {**os.environ, "AGENTLAB_VAR_DIR": str(tmp), "ALLOWED_HOSTS": "127.0.0.1",
           "DEBUG": "false", "LOG_LEVEL": "WARNING",
           # One bench user starts every run of a level at once: the per-user limit on runs
           # going (10 by default) is not what is measured.
           "AGENTLAB_MAX_ACTIVE_RUNS": "0"}
    for name in ("DATABASE_URL", "REDIS_URL", "AGENTLAB_RUNS_ON"):
        env.pop(name, None)  # never the developer's servers: the profile's own
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(settings.BASE_DIR),
                                                      env.get("PYTHONPATH")]))
    return env


def spawn(stack: ExitStack, cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
    proc = subprocess.Popen(cmd, env=env, cwd=str(settings.BASE_DIR), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)

    stack.callback(end_process, proc)  # only the processes this command started
    return proc


def servers_for(cluster: Cluster, stack: ExitStack, *, statements: bool = False) -> None:
    """The scale profile's PostgreSQL and Redis, in the environment of every process
    (`statements`: PostgreSQL counts its statements, for `Cluster.calls`)."""
    cluster.postgres = PostgresServer(statements=statements).start()
    stack.callback(cluster.postgres.stop)
    cluster.redis = RedisServer(Path(tempfile.mkdtemp(prefix="agentlab-bench-redis-"))).start()
    stack.callback(cluster.redis.stop)
    cluster.env.update(DATABASE_URL=cluster.postgres.url, REDIS_URL=cluster.redis.url,
                       AGENTLAB_RUNS_ON="workers", AGENTLAB_TAKEOVER_S="10")


def start_processes(cluster: Cluster, stack: ExitStack) -> None:
    """The web processes (and the workers): up and answering before this returns."""
    py = sys.executable
    for _ in range(cluster.web):
        port = free_port()
        daphne = spawn(stack, [py, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "-v",
                               "0", "agentlab.asgi:application"], cluster.env)
        url = f"http://127.0.0.1:{port}/healthz"
        wait_for(lambda u=url: urllib.request.urlopen(u, timeout=2).status == 200, "daphne",
                 60, daphne)
        cluster.ports.append(port)
        cluster.app_pids.append(daphne.pid)
    for _ in range(cluster.workers):
        worker = spawn(stack, [py, "manage.py", "worker", "--concurrency", "200"], cluster.env)
        cluster.app_pids.append(worker.pid)
    if cluster.workers:
        wait_for(lambda: _registered_workers(cluster) >= cluster.workers, "the workers", 60)


def _registered_workers(cluster: Cluster) -> int:
    import psycopg

    assert cluster.postgres is not None
    with psycopg.connect(cluster.postgres.url.replace("postgres://", "postgresql://")) as conn:
        row = conn.execute("SELECT count(*) FROM procrastinate_workers").fetchone()
    return int(row[0]) if row else 0
