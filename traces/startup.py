"""What a starting process does once: close what processes that are gone left open.

Every process that serves pages or executes runs sweeps, once: a web process at its first
request (traces.apps connects `request_started`), any process before it writes its first run
status (agentlab.runs.recorder), `manage.py serve` before it starts daphne. The sweep judges
owners by process identity (traces.owners: host, pid, start time, boot, place), so it is safe with
many processes, hosts or containers on one database: a live process's work is never touched, and
another machine's is not judged at all.

- runs left active by a dead process become `interrupted` (resumable as a fork);
- runs queued without an owner for more than QUEUED_GRACE_S (their page was never opened, or
  the process that would have started them stopped) become `interrupted`;
- imports left half-written by a dead process are deleted (traces.bundle_store);
- whatever the `sweep` hook closes (traces/hooks.py: the experiments of processes gone).
"""

from __future__ import annotations

import logging
import os
import threading
from datetime import timedelta
from typing import Any

from django.utils import timezone

from traces import bundle_store
from traces.hooks import hook
from traces.models import Run
from traces.owners import WORKER_PREFIX, left_by_dead_process
from traces.schema import ACTIVE_STATUSES

log = logging.getLogger(__name__)

QUEUED_GRACE_S = 600
INTERRUPTED = "The process running this run stopped before it finished; resume it as a fork."

_SWEPT: set[int] = set()  # pids that have swept (a forked child sweeps again)
_LOCK = threading.Lock()


def mark_interrupted() -> int:
    """Runs left active by a dead process, or queued and unowned for more than
    QUEUED_GRACE_S, become `interrupted`; returns the count."""
    # Runs of a task engine's workers are the engine's to recover (traces.owners.WORKER_PREFIX).
    active = (Run.objects.active().exclude(worker="")
              .exclude(worker__startswith=WORKER_PREFIX).only("pk", "worker"))
    dead = [run.pk for run in active if left_by_dead_process(run.worker)]
    stale = timezone.now() - timedelta(seconds=QUEUED_GRACE_S)
    dead += list(Run.objects.filter(status="queued", worker="", created__lt=stale)
                 .values_list("pk", flat=True))
    return Run.objects.filter(pk__in=dead, status__in=ACTIVE_STATUSES).update(
        status="interrupted", error=INTERRUPTED, finished_at=timezone.now())


def sweep() -> dict[str, int]:
    """Run every sweeper now; {name: how many}. A failing sweeper is logged, the rest go on."""
    counts: dict[str, int] = {}
    for name, fn in (("runs", mark_interrupted), ("imports", bundle_store.discard_abandoned),
                     ("others", hook("sweep"))):
        if fn is None:
            continue
        try:
            found = fn()
        except Exception:
            log.exception("the start-up sweep of %s failed", name)
            found = 0
        counts |= found if isinstance(found, dict) else {name: found}
    if any(counts.values()):
        log.warning("left by stopped processes: %s", ", ".join(
            f"{n} {name} closed" for name, n in counts.items() if n))
    return counts


def sweep_once() -> dict[str, int] | None:
    """sweep() the first time this process asks; None after that."""
    pid = os.getpid()
    if pid in _SWEPT:
        return None
    with _LOCK:
        if pid in _SWEPT:
            return None
        _SWEPT.add(pid)
    return sweep()


def swept() -> bool:
    return os.getpid() in _SWEPT


def on_request_started(**_kwargs: Any) -> None:
    """`request_started` receiver: a web process sweeps at its first request."""
    if not swept():
        sweep_once()
