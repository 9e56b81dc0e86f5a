"""Who owns a run: process ids that name one process exactly, and whether it still lives.

Pure (no Django): runs, experiments, imports and the embedded model's state file all ask the
same question after a restart — is the process that held this still alive?

A process id is `host:pid/start@boot.place` (e.g. `box:4242/1234567@5c1f9a0b2e3d.77aa12bc9e01`):
- `host`, `pid`: for people reading it;
- `start`: when the process started (clock ticks since boot, /proc/<pid>/stat): a pid that the
  kernel has since given to another process has another start, so it is not mistaken for it;
- `boot`: 12 hex digits of the kernel's boot id: after a reboot every earlier process is gone;
- `place`: 12 hex digits of a hash of the machine id and the pid namespace: another host (or
  container) that happens to have the same host name is another place, whose processes this
  one cannot see and therefore never judges.
Ids of the older form `host:pid` (rows written before this format) are still understood: on
this host, dead when no process has that pid or when it is this process's own pid (this
process writes the new form, so such a row was written by an earlier holder of the pid).
Without /proc (not Linux) `start` and `boot` are 0 and a pid is judged alive while it exists.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_ID = re.compile(r"^(?P<host>[^:/@]*):(?P<pid>\d+)"
                 r"(?:/(?P<start>\d+)@(?P<boot>[0-9a-f]+)\.(?P<place>[0-9a-f]+))?$")
_PROC = Path("/proc")
# Run.worker (the column that holds a run's owner) of a run executed by a worker process
# (agentlab.workers): "engine:<id>" (the value older rows carry, so it stays). The workers
# recover those runs (another worker takes them over), not the start-up sweep.
WORKER_PREFIX = "engine:"
# Run.worker of a received run (agentlab.receiver): no process executes it; its trace ends it.
RECEIVED = "receiver"
HOST_CHARS = 100  # of the host name kept in an id (Run.worker is a CharField of 200)


@dataclass(frozen=True)
class Identity:
    host: str
    pid: int
    start: int | None = None  # None: an id of the old form
    boot: str = ""
    place: str = ""

    def __str__(self) -> str:
        if self.start is None:
            return f"{self.host}:{self.pid}"
        return f"{self.host}:{self.pid}/{self.start}@{self.boot}.{self.place}"


def parse_process_id(owner: str) -> Identity | None:
    """The identity in a process id of either form; None for anything else (blank, foreign)."""
    m = _ID.match(owner or "")
    if m is None:
        return None
    start = int(m["start"]) if m["start"] is not None else None
    return Identity(m["host"], int(m["pid"]), start, m["boot"] or "", m["place"] or "")


_MINE: dict[int, tuple[Identity, str]] = {}  # pid -> this process's identity and its id


def this_process() -> Identity:
    return _mine()[0]


def process_id() -> str:
    """This process's id (computed once per process: it tags every fanout message)."""
    return _mine()[1]


_WORKERS: set[int] = set()  # pids of processes that are workers (`manage.py worker`)


def become_worker() -> None:
    """This process is a worker that executes queued runs: the runs it holds are marked so."""
    _WORKERS.add(os.getpid())


def owner_id() -> str:
    """What this process writes as the owner of a run it executes (`Run.worker`)."""
    prefix = WORKER_PREFIX if os.getpid() in _WORKERS else ""
    return prefix + process_id()


def _mine() -> tuple[Identity, str]:
    pid = os.getpid()  # a forked child is another process: it gets its own
    if (mine := _MINE.get(pid)) is None:
        me = Identity(socket.gethostname()[:HOST_CHARS], pid, process_start(pid) or 0,
                      _boot(), _place())
        mine = _MINE[pid] = (me, str(me))
    return mine


def process_start(pid: int) -> int | None:
    """When process `pid` started, in clock ticks since boot; None when there is no such
    process (or no /proc to ask)."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # "pid (comm) state ppid …": comm may hold spaces and parentheses; starttime is field 22.
    fields = stat.rpartition(")")[2].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


def left_by_dead_process(worker: str) -> bool:
    """True when the process named by `worker` is certainly gone: one of this place whose pid
    is free or now another process's, or one of an earlier boot. Never this process; never a
    process of another place (host or container), nor a blank or unreadable id."""
    other, me = parse_process_id(worker), this_process()
    if other is None or other.host != me.host:
        return False
    if other.start is None:  # the old form "host:pid"
        return other.pid == me.pid or not pid_alive(other.pid)
    if other.place != me.place:
        return False
    if other == me:
        return False
    if other.boot != me.boot and "0" not in (other.boot, me.boot):  # "0": no /proc to ask
        return True  # that boot is over, and every process of it
    if not pid_alive(other.pid):
        return True
    started = process_start(other.pid)
    return other.start != 0 and started is not None and started != other.start


def _boot() -> str:
    try:
        boot = (_PROC / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "0"
    return hashlib.sha256(boot.encode()).hexdigest()[:12]


def _place() -> str:
    machine = ""
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            machine = Path(path).read_text().strip()
            break
        except OSError:
            continue
    try:
        namespace = os.readlink(_PROC / "self/ns/pid")
    except OSError:
        namespace = ""
    # The host name too: containers made from one image may share a baked-in machine id.
    seed = f"{machine}|{namespace}|{socket.gethostname()}"
    return hashlib.sha256(seed.encode()).hexdigest()[:12]


def end_process(process: subprocess.Popen[Any], grace_s: float = 10) -> None:
    """Stop a process this one started, by its handle: SIGTERM, then SIGKILL after `grace_s`
    (the benches' servers and the tests' daphne and Phoenix)."""
    process.terminate()
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
