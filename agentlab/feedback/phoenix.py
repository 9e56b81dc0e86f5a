"""Feedback as span annotations in Arize Phoenix, beside the live export of spans
(traces/otel/live.py; docs/INTEROP.md "Feedback as annotations").

Phoenix does not read annotations from OTLP: it takes them through its REST API,
`POST /v1/span_annotations` (a score, a label and an explanation under a name, upserted on
name, span and `identifier`) and `POST /v1/span_notes` (its "note" name is reserved for those).
A run made here was exported with span ids derived from its id and each step's seq
(traces/otel/ids.py), so feedback on step N annotates step N's span, and feedback on the run
annotates its root span; an imported run's spans were never ours, and get nothing.

Sending is a background thread's: a request never waits for Phoenix, a Phoenix that is down
costs it nothing (the queue is bounded; what does not fit is dropped and counted).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction

from agentlab.feedback.values import NOTE
from traces.otel import ids
from traces.redact import redact_text

log = logging.getLogger(__name__)
QUEUE_SIZE = 10_000
TIMEOUT_S = 10
# Sent synchronously (?sync=true), so a delete that follows a write finds it, in order; a span
# that has not reached Phoenix yet (its export batches) is a 404, tried again a few times.
RETRIES = 3
RETRY_S = 2.0


@dataclass
class Stats:
    sent: int = 0
    failed: int = 0
    dropped: int = 0
    last_error: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **counts: int) -> None:
        with self.lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)

    def error(self, message: str) -> None:
        with self.lock:
            self.failed += 1
            self.last_error = redact_text(message)[:500]


STATS = Stats()


def base_url() -> str | None:
    """Phoenix's base URL, or None when no annotation is sent."""
    explicit = settings.AGENTLAB_ANNOTATIONS_URL
    if explicit.lower() == "off":
        return None
    if explicit:
        return explicit.rstrip("/")
    if not settings.AGENTLAB_OTEL_LIVE:
        return None
    traces_url = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").rstrip("/")
    if traces_url:
        return traces_url.removesuffix("/v1/traces") or None
    return os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").rstrip("/") or None


def headers() -> dict[str, str]:
    """The exporter's headers (Phoenix's API key), as the OTLP variables spell them:
    `name=value,…`, URL-encoded."""
    raw = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
           or os.environ.get("OTEL_EXPORTER_OTLP_HEADERS") or "")
    found = {}
    for item in raw.split(","):
        name, eq, value = item.partition("=")
        if eq and name.strip():
            found[urllib.parse.unquote(name.strip())] = urllib.parse.unquote(value.strip())
    return found


def ours(snapshot: Any) -> bool:
    """Were this run's spans exported by this installation (not imported from elsewhere)?"""
    return not (isinstance(snapshot, dict) and "imported_from" in snapshot)


def identifier(row: Any) -> str:
    """One annotation per feedback row: giving it again (an edit) updates it in Phoenix."""
    return f"agentlab-{ids.installation_id()}-{row.pk}"


def annotation(row: Any) -> dict[str, Any]:
    """The body item of POST /v1/span_annotations for one feedback row."""
    result = {"score": row.score, "label": row.label or None, "explanation": row.note or None}
    return {"span_id": ids.hex_span(ids.span_id(row.run_id, row.seq)), "name": row.name,
            "annotator_kind": "HUMAN" if row.source == "human" else "CODE",
            "result": result, "identifier": identifier(row),
            "metadata": {"author": row.who, "agentlab.run": row.run_id,
                         "agentlab.seq": row.seq}}


def note(row: Any) -> dict[str, Any]:
    return {"span_id": ids.hex_span(ids.span_id(row.run_id, row.seq)), "note": row.note,
            "identifier": identifier(row)}


@dataclass
class Job:
    method: str
    path: str
    body: dict[str, Any] | None = None
    retries: int = 0


def job_for(row: Any) -> Job:
    if row.name == NOTE:
        return Job("POST", "/v1/span_notes", {"data": note(row)}, RETRIES)
    return Job("POST", "/v1/span_annotations?sync=true", {"data": [annotation(row)]}, RETRIES)


def delete_job(row: Any) -> Job:
    project = urllib.parse.quote(settings.AGENTLAB_OTEL_PROJECT, safe="")
    # Phoenix asks an unbounded-in-time delete to say so (delete_all); the identifier (one per
    # row and installation) and the name narrow it to this one annotation.
    query = urllib.parse.urlencode({"identifier": identifier(row), "name": row.name,
                                    "delete_all": "true"})
    return Job("DELETE", f"/v1/projects/{project}/span_annotations?{query}")


def _wanted(row: Any) -> bool:
    return base_url() is not None and ours(row.run.agent_snapshot)


def on_commit_send(row: Any) -> None:
    """Send the row as it is now, once the transaction that wrote it commits."""
    if _wanted(row):
        job = job_for(row)
        transaction.on_commit(lambda: submit(job))


def on_commit_delete(row: Any) -> None:
    if _wanted(row):
        job = delete_job(row)
        transaction.on_commit(lambda: submit(job))


# -- the sender -------------------------------------------------------------------------------

_QUEUE: queue.Queue[Job] = queue.Queue(QUEUE_SIZE)
_THREAD: threading.Thread | None = None
_LOCK = threading.Lock()


def submit(job: Job) -> None:
    global _THREAD
    with _LOCK:
        if _THREAD is None or not _THREAD.is_alive():
            _THREAD = threading.Thread(target=_work, name="feedback-annotations", daemon=True)
            _THREAD.start()
    try:
        _QUEUE.put_nowait(job)
    except queue.Full:
        STATS.add(dropped=1)


def flush(timeout_s: float = 30.0) -> bool:
    """Wait until everything queued was sent or given up (tests, commands)."""
    deadline = time.monotonic() + timeout_s
    while _QUEUE.unfinished_tasks and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _QUEUE.unfinished_tasks


def _work() -> None:
    while True:
        job = _QUEUE.get()
        try:
            _send(job)
        except Exception:  # never let one bad job stop the thread
            log.exception("feedback annotation %s %s failed", job.method, job.path)
            STATS.error("unexpected error (the server log has it)")
        finally:
            _QUEUE.task_done()


def _send(job: Job) -> None:
    base = base_url()
    if base is None:
        return
    data = json.dumps(job.body).encode() if job.body is not None else None
    request = urllib.request.Request(base + job.path, data=data, method=job.method,
                                     headers={"Content-Type": "application/json", **headers()})
    for attempt in range(job.retries + 1):
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                response.read()
            STATS.add(sent=1)
            return
        except urllib.error.HTTPError as exc:
            if exc.code == 404 and attempt < job.retries:
                time.sleep(RETRY_S)
                continue
            detail = exc.read()[:300].decode(errors="replace")
            STATS.error(f"{job.method} {job.path.split('?')[0]}: HTTP {exc.code} {detail}")
            return
        except OSError as exc:
            STATS.error(f"{job.method} {base}: {exc}")
            return
