"""The two receivers `manage.py bench_ingest` measures, and how it sends to them.

- `AgentLab`: daphne on a free port with its own throw-away state folder (SQLite), a user with
  a browser session and an `ingest` token (`prepare`, run in that folder). Spans are queryable
  when their trace's run is finished and its steps are rows (read from the SQLite file).
- `Phoenix`: Arize Phoenix in its own virtualenv (requirements-phoenix.txt) with its own
  working folder. Spans are queryable when its GraphQL API counts them all in the project
  (checked once more through its REST API).

`post` sends one request as OTLPSpanExporter does: the protobuf body, `application/x-protobuf`,
retried on 429/502/503/504 after Retry-After (or 1, 2, 4 … s), at most 6 tries.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import requests

from agentlab.bench.otlp_payload import BATCH, Trace, bodies, export_order
from agentlab.bench.servers import free_port

PROTOBUF = {"Content-Type": "application/x-protobuf",
            "User-Agent": "OTel-OTLP-Exporter-Python/1.45.2"}
RETRYABLE = (429, 502, 503, 504)
TRIES = 6
EXPORT_TIMEOUT_S = 10  # OTLPSpanExporter's default per request
# The pin scripts/lib.sh installs Phoenix from (one place for the version).
_PIN = re.search(r"^arize-phoenix==(\S+)", (Path(__file__).resolve().parents[2]
                                            / "requirements-phoenix.txt").read_text(), re.M)
PHOENIX_VERSION = _PIN.group(1) if _PIN else "?"


@dataclass
class Sent:
    """What sending a series of requests took."""

    spans: int = 0
    requests: int = 0
    retries: int = 0
    dropped: int = 0  # requests given up on (a non-retryable status, or out of tries)
    rejected: int = 0  # spans an accepted request's partial-success answer refused
    statuses: dict[int, int] = field(default_factory=dict)
    starts: list[float] = field(default_factory=list)  # time.time() as each request began
    first_error: str = ""

    def add(self, other: Sent) -> None:
        self.spans += other.spans
        self.requests += other.requests
        self.retries += other.retries
        self.dropped += other.dropped
        self.rejected += other.rejected
        for code, n in other.statuses.items():
            self.statuses[code] = self.statuses.get(code, 0) + n
        self.starts += other.starts
        self.first_error = self.first_error or other.first_error


def post(session: requests.Session, url: str, headers: dict[str, str], body: bytes,
         spans: int) -> Sent:
    """One export request, retried as the SDK's exporter retries it."""
    sent = Sent(spans=spans, requests=1, starts=[time.time()])
    for attempt in range(TRIES):
        try:
            r = session.post(url, data=body, headers=headers, timeout=EXPORT_TIMEOUT_S)
            code, text, wait = r.status_code, r.text, _retry_after(r)
        except requests.RequestException as exc:
            code, text, wait = 0, str(exc), None
        sent.statuses[code] = sent.statuses.get(code, 0) + 1
        if 200 <= code < 300:
            sent.rejected, why = _rejected(r.content)
            if why:
                sent.first_error = f"{code}, partial success: {why[:300]}"
            return sent
        if code not in RETRYABLE and code != 0 or attempt == TRIES - 1:
            break
        sent.retries += 1
        time.sleep(wait if wait is not None else 2 ** attempt)
    sent.dropped = 1
    sent.first_error = f"{code}: {text[:300]}"
    return sent


def _rejected(body: bytes) -> tuple[int, str]:
    """Spans refused and why, from an ExportTraceServiceResponse (OTLP's partial success)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    answer = ExportTraceServiceResponse()
    try:
        answer.ParseFromString(body)
    except Exception:  # not protobuf (a peer that answers JSON): nothing to read
        return 0, ""
    return answer.partial_success.rejected_spans, answer.partial_success.error_message


def _retry_after(r: requests.Response) -> float | None:
    try:
        return float(r.headers["Retry-After"])
    except (KeyError, ValueError):
        return None


def send_all(url: str, headers: dict[str, str], bodies: list[tuple[int, bytes]]) -> Sent:
    """The requests one after another, as a BatchSpanProcessor exports (one at a time)."""
    total = Sent()
    with requests.Session() as session:
        for spans, body in bodies:
            total.add(post(session, url, {**PROTOBUF, **headers}, body, spans))
    return total


def rss_kb(pid: int) -> int:
    """Resident memory of a process, in KB (Linux /proc; 0 elsewhere)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def wait_until(check: Any, timeout: float, interval: float = 0.05) -> float | None:
    """Seconds since the epoch when `check()` first held, or None after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return time.time()
        if time.monotonic() > deadline:
            return None
        time.sleep(interval)


# ---------------------------------------------------------------------------- Agent Lab


@dataclass
class AgentLab:
    """One daphne process of Agent Lab, on its own state folder."""

    folder: Path
    port: int = 0
    pid: int = 0
    token: str = ""
    cookie: str = ""  # "name=value" of a logged-in browser session

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/traces"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def database(self) -> Path:
        return self.folder / "agentlab.sqlite3"

    def start(self, stack: ExitStack, env: dict[str, str]) -> None:
        from agentlab.bench.cluster import Cluster, start_processes

        done = subprocess.run([sys.executable, "-m", "agentlab.bench.ingest", "prepare"],
                              env=env, capture_output=True, text=True, timeout=300)
        if done.returncode:
            raise RuntimeError(f"preparing Agent Lab failed:\n{done.stderr[-2000:]}")
        prepared = json.loads(done.stdout.strip().splitlines()[-1])
        self.token, self.cookie = prepared["token"], prepared["cookie"]
        cluster = Cluster("web", web=1, env=env)
        start_processes(cluster, stack)
        self.port, self.pid = cluster.ports[0], cluster.app_pids[0]

    def holds(self, traces: list[Trace]) -> bool:
        """Every non-root span is a step row, and every trace with its root a finished run
        (a root AGENT span is the run itself, not a step)."""
        from traces.schema import FINISHED_STATUSES

        steps, finished = self.counts([t.hex_id for t in traces], tuple(FINISHED_STATUSES))
        return (steps >= sum(len(t.spans) - t.root for t in traces)
                and finished >= sum(t.root for t in traces))

    def counts(self, trace_ids: list[str], finished: tuple[str, ...]) -> tuple[int, int]:
        """(step rows, finished runs) of the runs made from these traces."""
        with sqlite3.connect(f"file:{self.database}?mode=ro", uri=True, timeout=30) as db:
            return counts(db, trace_ids, finished)

    def run_id(self, trace_id: str) -> int | None:
        with sqlite3.connect(f"file:{self.database}?mode=ro", uri=True, timeout=30) as db:
            row = db.execute("SELECT run_id FROM receiver_receivedtrace WHERE trace_id = ?",
                             (trace_id,)).fetchone()
        return int(row[0]) if row else None


def counts(db: sqlite3.Connection, trace_ids: list[str], finished: tuple[str, ...]
           ) -> tuple[int, int]:
    ids = json.dumps(trace_ids)
    runs = ("SELECT run_id FROM receiver_receivedtrace "
            "WHERE trace_id IN (SELECT value FROM json_each(?))")
    steps = db.execute(f"SELECT count(*) FROM traces_step WHERE run_id IN ({runs})",  # noqa: S608
                       (ids,)).fetchone()[0]
    marks = ",".join("?" * len(finished))
    done = db.execute(f"SELECT count(*) FROM traces_run WHERE id IN ({runs}) "  # noqa: S608
                      f"AND status IN ({marks})", (ids, *finished)).fetchone()[0]
    return int(steps), int(done)


def prepare() -> dict[str, Any]:
    """In a fresh state folder: migrate, then a user with a browser session and an ingest
    token (run as its own process, in the bench's environment)."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentlab.settings")
    django.setup()
    from importlib import import_module

    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from agentlab.tokens.models import create_token

    call_command("migrate", verbosity=0, interactive=False)
    user = User.objects.create_user("bench", password=None)
    session = import_module(settings.SESSION_ENGINE).SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    _row, token = create_token(user, name="bench_ingest", scope="ingest")
    return {"token": token, "cookie": f"{settings.SESSION_COOKIE_NAME}={session.session_key}"}


# ---------------------------------------------------------------------------- Phoenix


def phoenix_python() -> Path:
    """The Phoenix virtualenv scripts/test makes (scripts/lib.sh ensure_phoenix)."""
    return Path.home() / ".cache" / "agentlab" / f"phoenix-{PHOENIX_VERSION}" / "bin" / "python"


@dataclass
class Phoenix:
    python: Path
    folder: Path
    port: int = 0
    process: subprocess.Popen | None = None

    @property
    def pid(self) -> int:
        return self.process.pid if self.process else 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return self.base + "/v1/traces"

    @property
    def headers(self) -> dict[str, str]:
        return {}  # Phoenix's default: no authentication

    def start(self, stack: ExitStack, timeout: float = 180) -> None:
        self.port = free_port()
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OTEL_", "DJANGO_", "AGENTLAB_", "DATABASE_URL"))}
        env |= {"PHOENIX_WORKING_DIR": str(self.folder), "PHOENIX_HOST": "127.0.0.1",
                "PHOENIX_PORT": str(self.port), "PHOENIX_GRPC_PORT": str(free_port()),
                "PHOENIX_TELEMETRY_ENABLED": "false"}
        log = (self.folder / "phoenix.log").open("wb")
        stack.callback(log.close)
        self.process = subprocess.Popen([str(self.python), "-m", "phoenix.server.main", "serve"],
                                        env=env, stdout=log, stderr=subprocess.STDOUT)
        stack.callback(self.stop)
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                tail = (self.folder / "phoenix.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"Phoenix exited with {self.process.returncode}:\n{tail}")
            try:
                with urllib.request.urlopen(self.base + "/healthz", timeout=2):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Phoenix did not answer within {timeout:g} s") from None
                time.sleep(0.5)

    def stop(self) -> None:  # only the process this bench started, by its handle
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def holds(self, traces: list[Trace]) -> bool:
        want: dict[str, int] = {}
        for t in traces:
            want[t.project] = want.get(t.project, 0) + len(t.spans)
        return all(self.span_count(p) >= n for p, n in want.items())

    def span_count(self, project: str) -> int:
        """Spans of `project` its GraphQL API counts (0 before the project exists)."""
        query = "{ projects(first: 1000) { edges { node { name recordCount } } } }"
        request = urllib.request.Request(self.base + "/graphql",
                                         data=json.dumps({"query": query}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            edges = json.load(response)["data"]["projects"]["edges"]
        return next((int(e["node"]["recordCount"]) for e in edges
                     if e["node"]["name"] == project), 0)

    def rest_span_count(self, project: str) -> int:
        """Spans of `project` its REST API returns, every page read."""
        found, cursor = 0, ""
        while True:
            try:
                with urllib.request.urlopen(
                        f"{self.base}/v1/projects/{project}/spans?limit=1000{cursor}",
                        timeout=60) as response:
                    page = json.load(response)
            except urllib.error.HTTPError as exc:
                if exc.code == 404:  # no span stored yet
                    return found
                raise
            found += len(page["data"])
            if not page.get("next_cursor"):
                return found
            cursor = f"&cursor={page['next_cursor']}"


# ---------------------------------------------------------------------------- the figures


class Target(Protocol):
    url: str
    headers: dict[str, str]
    pid: int

    def holds(self, traces: list[Trace]) -> bool:
        """Every span of `traces` is queryable (a trace with its root: finished too)."""
        ...


@dataclass
class Throughput:
    spans: int
    traces: int
    sent: Sent
    answered_s: float  # first request's start → last request's answer
    seconds: float | None  # → all queryable; None: not within the cap

    @property
    def spans_per_s(self) -> float | None:
        return self.spans / self.seconds if self.seconds else None


def throughput(target: Target, traces: list[Trace], timeout: float, interval: float = 0.05,
               size: int = BATCH) -> Throughput:
    """Send `traces` in the SDK's batches; how long until all of it is queryable (encoded
    before the clock starts: the agent's CPU is not the receiver's)."""
    payload = bodies(export_order(traces), size)
    began = time.time()
    sent = send_all(target.url, target.headers, payload)
    answered = time.time() - began
    at = wait_until(lambda: target.holds(traces), max(0.0, timeout - answered), interval)
    return Throughput(spans=sum(len(t.spans) for t in traces), traces=len(traces), sent=sent,
                      answered_s=answered, seconds=None if at is None else at - began)


@dataclass
class Buffered:
    spans: int
    rss_before_kb: int
    rss_after_kb: int
    held: bool  # the target showed every span before the second reading
    sent: Sent

    @property
    def kb_per_1000(self) -> float:
        return (self.rss_after_kb - self.rss_before_kb) * 1000 / self.spans


def buffered(target: Target, traces: list[Trace], timeout: float,
             size: int = BATCH) -> list[Buffered]:
    """The target's RSS before and after it holds each open trace (no root: not finished),
    one after the other: the first reading includes what any first trace costs (caches,
    imports, the allocator's arenas), the next ones are what more spans held cost."""
    out = []
    for trace in traces:
        payload = bodies(export_order([trace]), size)
        before = rss_kb(target.pid)
        sent = send_all(target.url, target.headers, payload)
        held = wait_until(lambda t=trace: target.holds([t]), timeout, 0.2) is not None
        out.append(Buffered(spans=len(trace.spans), rss_before_kb=before,
                            rss_after_kb=rss_kb(target.pid), held=held, sent=sent))
    return out


if __name__ == "__main__":
    if sys.argv[1:] == ["prepare"]:
        print(json.dumps(prepare()))
    else:
        sys.exit("usage: python -m agentlab.bench.ingest prepare")
