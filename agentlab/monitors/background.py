"""Where live scorers run: a daemon thread of their own, with its own event loop for the
judge's requests, started once per process — by a web process's first HTTP request
(agentlab.asgi) where runs execute in the web processes, and by `manage.py worker` where
they execute on workers. Never on the web server's event loop: a pass reads and writes the
database synchronously and awaits its scores on the thread's loop.

Every AGENTLAB_LIVE_SCORING_EVERY_S seconds it makes one pass (agentlab/monitors/passes.py);
0 turns it off in this process. Several processes may pass at once: claims are rows."""

from __future__ import annotations

import asyncio
import logging
import os
import threading

from django.conf import settings
from django.db import close_old_connections, connection

from agentlab.monitors import passes

log = logging.getLogger(__name__)

_LOCK = threading.Lock()
_STARTED: dict[int, threading.Thread] = {}  # pid -> its thread (a forked child starts its own)
_STOP = threading.Event()


def ensure_running() -> bool:
    """Start this process's scoring thread unless it runs or is turned off; whether it runs."""
    if settings.AGENTLAB_LIVE_SCORING_EVERY_S <= 0:
        return False
    pid = os.getpid()
    with _LOCK:
        thread = _STARTED.get(pid)
        if thread is None or not thread.is_alive():
            _STOP.clear()
            thread = threading.Thread(target=_forever, name="live-scorers", daemon=True)
            _STARTED[pid] = thread
            thread.start()
    return True


def _forever() -> None:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    failures = 0
    while not _STOP.wait(settings.AGENTLAB_LIVE_SCORING_EVERY_S):
        try:
            close_old_connections()
            counts = passes.run_once(loop)
            if counts:
                log.info("live scorers: %s", dict(counts))
            failures = 0
        except Exception:  # the database is away: try again next time, and say so once
            failures += 1
            if failures == 1:
                log.exception("a live scorers' pass failed")
        finally:
            connection.close()
    loop.close()


def stop(timeout_s: float = 30.0) -> None:
    """Stop this process's scoring thread after its pass (tests; a process ends without it)."""
    _STOP.set()
    thread = _STARTED.pop(os.getpid(), None)
    if thread is not None:
        thread.join(timeout_s)


class StartOnFirstRequest:
    """An ASGI wrapper: a web process starts its scoring thread at its first HTTP request
    when runs execute in the web processes (AGENTLAB_RUNS_ON=web); with workers, they score."""

    def __init__(self, app: object) -> None:
        self.app = app
        self.started = False

    async def __call__(self, scope: dict, receive: object, send: object) -> object:
        if not self.started and scope.get("type") == "http":
            self.started = True
            if settings.AGENTLAB_RUNS_ON == "web":
                ensure_running()  # a thread start: nothing waits on this loop
        return await self.app(scope, receive, send)  # type: ignore[operator]
