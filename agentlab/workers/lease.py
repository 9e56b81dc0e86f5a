"""A worker's heartbeat, beaten from a thread of its own, and the lease it gives the worker's runs.

procrastinate beats from the worker's event loop, so code that blocks the loop (a tool that
computes on it, a pattern that backtracks, any synchronous call) silenced the heartbeat too:
after AGENTLAB_TAKEOVER_S another worker took the run over while this one, its loop free again,
went on executing it. Two workers executed one run. Now (docs/ARCHITECTURE.md "A stalled event
loop"):

- **The heartbeat is this thread's** (`Lease`), on a connection of its own: a loop that is
  slow or stalled for a while is not a dead worker, and its runs are not taken over.
- **A loop stalled for good stops the worker** (`AGENTLAB_WORKER_STALL_S`, the loop's own tick
  is watched): the process exits at once, and only then does its heartbeat stop, so its runs
  are taken over from their traces with nobody still executing them.
- **The lease**: a beat can still miss (the thread needs the GIL, which C code blocking the
  loop may hold; the database may be unreachable). When more than AGENTLAB_TAKEOVER_S passed
  since the last beat that reached the database was sent, another worker may hold this
  worker's runs now: the thread, and every run before its next step (`check`, through the
  run's fence), stop the process. Its worker row gone (pruned as stalled by a worker that
  started) means the same.
- **The fence** is what makes it safe whatever the timing (agentlab.runs.writer): each row and
  status of a run is written only while `Run.worker` names this execution; a refused write
  calls `lost`, which stops the process.

A stopped worker exits with EXIT_LOST; whatever supervises the workers starts it again.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from typing import Any

import psycopg

log = logging.getLogger(__name__)

HEARTBEAT_S = 1.0
EXIT_LOST = 75  # EX_TEMPFAIL: the worker stopped because its runs may be another's now

LEASE: list[Lease] = []  # this worker process's (agentlab.workers.process.serve)

BEAT = "UPDATE procrastinate_workers SET last_heartbeat = NOW() WHERE id = %s RETURNING id"


class Lease:
    """The heartbeat of one worker process (`worker`: procrastinate's Worker, whose
    `worker_id` is its row in procrastinate_workers once registered)."""

    def __init__(self, conninfo: str, worker: Any, *, takeover_s: float, stall_s: float,
                 exit: Any = os._exit) -> None:
        self.conninfo, self.worker = conninfo, worker
        self.takeover_s, self.stall_s = takeover_s, stall_s
        self._exit = exit  # tests replace it
        now = time.monotonic()
        # When the last beat that reached the database was sent (before the database stamped
        # it: the time since is never less than what the other workers' sweep measures).
        self.last_sent = now
        self.loop_seen = now  # the loop's last tick
        # Asked to stop (SIGTERM): it still beats while it finishes its runs (procrastinate's
        # own heartbeat stops then), but its row going is no loss any more.
        self.stopping = False
        self.registered = False
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._ticker: asyncio.Task[None] | None = None

    def start(self) -> Lease:
        self._ticker = asyncio.get_running_loop().create_task(self._tick(), name="loop-tick")
        self._thread = threading.Thread(target=self._beat_forever, name="agentlab-heartbeat",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """The worker is over (its runs finished, its row gone): no more beats."""
        self.stopping = True
        self._done.set()
        if self._ticker is not None:
            self._ticker.cancel()

    def lapsed(self) -> float:
        """Seconds since the last beat that reached the database was sent."""
        return time.monotonic() - self.last_sent

    def check(self) -> None:
        """Before a run's step: stop the process if the lease may have lapsed."""
        if self.lapsed() > self.takeover_s:
            self.lost(None, f"its heartbeat lapsed {self.lapsed():.1f} s ago, past the "
                            f"takeover time ({self.takeover_s:g} s)")

    def lost(self, run_id: int | None, why: str) -> None:
        """This worker's runs may be executed by another worker now: stop at once, before
        anything more is done (from any thread). Its runs are taken over from their traces."""
        about = f"run {run_id}: " if run_id is not None else ""
        log.critical("%sthis worker stops (exit %d): %s", about, EXIT_LOST, why)
        for handler in logging.getLogger().handlers:
            handler.flush()
        self._exit(EXIT_LOST)

    async def _tick(self) -> None:
        while True:
            self.loop_seen = time.monotonic()
            await asyncio.sleep(HEARTBEAT_S)

    def _beat_forever(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        while not self._done.wait(HEARTBEAT_S):
            try:
                conn = conn if conn is not None and not conn.closed else psycopg.connect(
                    self.conninfo, autocommit=True, connect_timeout=max(1, int(self.takeover_s)))
                self.beat(conn)
            except Exception:  # the database blinked: the lease decides how long that may be
                log.warning("the heartbeat failed this time", exc_info=True)
                if conn is not None:
                    conn.close()
                conn = None
                self.beat(None)
        if conn is not None:
            conn.close()

    def beat(self, conn: psycopg.Connection[Any] | None) -> None:
        """One beat: first whether the loop or the lease is lost, then the heartbeat."""
        worker_id = self.worker.worker_id
        if worker_id is None:
            if not self.registered:  # not registered yet: no run to lose; the lease starts now
                self.last_sent = time.monotonic()
            return  # else unregistered: the worker is over
        self.registered = True
        stalled = time.monotonic() - self.loop_seen
        if self.stall_s > 0 and stalled > self.stall_s:
            self.lost(None, f"its event loop has not run for {stalled:.0f} s "
                            f"(AGENTLAB_WORKER_STALL_S={self.stall_s:g})")
        self.check()
        if conn is None:
            return
        sent = time.monotonic()
        if conn.execute(BEAT, [worker_id]).fetchone() is not None:
            self.last_sent = sent
        elif not self.stopping and self.worker.worker_id is not None:
            self.lost(None, "its worker row is gone (pruned as stalled by a worker starting)")
