"""Which process does the work: "host:pid" worker ids, and whether such a process still lives.

Pure (no Django): runs, experiments and the embedded model's state file all ask the same
question after a restart — is the process that held this still alive?"""

from __future__ import annotations

import os
import socket


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


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


def left_by_dead_process(worker: str, host: str | None = None) -> bool:
    """True for a worker id of this host whose process is gone (never this process)."""
    name, _, pid = worker.rpartition(":")
    if name != (host or socket.gethostname()) or not pid.isdigit():
        return False
    return int(pid) != os.getpid() and not pid_alive(int(pid))
