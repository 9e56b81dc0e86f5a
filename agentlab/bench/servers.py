"""Real servers for the tests and benchmarks, as users run them: Debian's redis-server and
PostgreSQL, each on a free loopback port with its files in a temporary folder, gone when it
stops.

`tests/redis_fixtures.py` gives a Redis per test session; `bench_task_queues` starts both for the
task queues it measures; `tests/scale_profile.py` starts both
before Django reads its settings, so a whole test run can use them as DATABASE_URL and
REDIS_URL (the scale profile, docs/TESTING.md).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.waiting import wait_until

START_S = 30  # a cold PostgreSQL on a busy 2-core machine takes 2–6 s; Redis well under 1 s


class ServerMissing(RuntimeError):
    """The server's program is not installed (scripts/test installs Debian's packages)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def database_url(settings_dict: dict[str, Any]) -> str:
    """The URL another process uses to reach the database this one tests on (its test
    database: the same rows, for tests that start daphne or a second recorder)."""
    name = settings_dict["NAME"]
    if settings_dict["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{name}"
    user = settings_dict.get("USER") or ""
    password = f":{settings_dict['PASSWORD']}" if settings_dict.get("PASSWORD") else ""
    at = f"{user}{password}@" if user else ""
    host, port = settings_dict.get("HOST") or "127.0.0.1", settings_dict.get("PORT") or 5432
    return f"postgres://{at}{host}:{port}/{name}"


def _answers_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@dataclass
class RedisServer:
    """`redis-server` on a free port, nothing saved to disk."""

    folder: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        exe = shutil.which("redis-server")
        if exe is None:
            raise ServerMissing("redis-server is not installed (scripts/test installs Debian's)")
        log = (self.folder / "redis.log").open("wb")
        self.process = subprocess.Popen(
            [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder),
             "--save", "", "--appendonly", "no"], stdout=log, stderr=subprocess.STDOUT)
        log.close()  # the child holds its own descriptor
        wait_until(lambda: self.process.poll() is not None or _answers_ping(self.port),
                   timeout=START_S, message="redis-server answers PING")
        if self.process.poll() is not None:
            raise RuntimeError((self.folder / "redis.log").read_text())
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


def postgres_bin() -> Path:
    """Debian's PostgreSQL programs (/usr/lib/postgresql/<version>/bin), the newest installed."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parent.parent.name))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb is None:
        raise ServerMissing("PostgreSQL is not installed (scripts/test installs Debian's)")
    return Path(initdb).parent


@dataclass
class PostgresServer:
    """A throw-away PostgreSQL cluster: trust authentication on loopback only, fsync off (its
    data dies with it), user `agentlab`. PostgreSQL refuses to run as root, so under root the
    cluster belongs to Debian's `postgres` account."""

    port: int = field(default_factory=free_port)
    folder: Path | None = None
    user: str = "agentlab"
    # pg_stat_statements loaded and created (bench_live --calls: statements per step)
    statements: bool = False

    @property
    def url(self) -> str:
        return f"postgres://{self.user}@127.0.0.1:{self.port}/{self.user}"

    def _as_owner(self, *command: str | Path) -> list[str]:
        args = [str(c) for c in command]
        if os.geteuid() == 0:
            return ["runuser", "-u", "postgres", "--", *args]
        return args

    def _run(self, *command: str | Path) -> None:
        done = subprocess.run(self._as_owner(*command), capture_output=True, text=True,
                              timeout=120)
        if done.returncode:
            raise RuntimeError(f"{Path(str(command[0])).name} failed: {done.stderr.strip()}")

    def start(self) -> PostgresServer:
        bindir = postgres_bin()
        # Not under pytest's tmp_path: the postgres account must reach it, and root's is 0700.
        self.folder = Path(tempfile.mkdtemp(prefix="agentlab-pg-"))
        if os.geteuid() == 0:
            os.chown(self.folder, pwd.getpwnam("postgres").pw_uid, -1)
        data = self.folder / "data"
        self._run(bindir / "initdb", "-D", data, "-U", self.user, "--auth=trust", "-E", "UTF8",
                  "--no-sync")
        self._run(bindir / "pg_ctl", "-D", data, "-l", self.folder / "postgres.log", "-w",
                  "-t", str(START_S), "-o",
                  f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 "
                  "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                  "-c max_connections=200"
                  + (" -c shared_preload_libraries=pg_stat_statements" if self.statements else ""),
                  "start")
        self._run(bindir / "createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user,
                  self.user)
        if self.statements:
            self._run(bindir / "psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user,
                      "-c", "CREATE EXTENSION pg_stat_statements", self.user)
        return self

    def stop(self) -> None:
        if self.folder is None:
            return
        try:
            self._run(postgres_bin() / "pg_ctl", "-D", self.folder / "data", "-m", "immediate",
                      "-w", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
