"""The anchor `manage.py bench_traces --phoenix` prints beside Agent Lab's run page: one agent
trace of N spans opened in Arize Phoenix on the same machine (the hook `phoenix_anchor`,
traces/hooks.py, since `traces` does not import `agentlab`).

The trace is bench_ingest's (otlp_payload: OpenInference spans as the SDK exports them, 512 a
request); Phoenix runs in its own virtualenv and throw-away folder (ingest.Phoenix). The figure
is the time from the first request until Phoenix's API gives every span of the trace: its
GraphQL API counts them all in the trace's project, then its REST API's pages of spans (what
its trace page reads) are read, every one. The same trace's OTLP is handed back for Agent Lab
to open: the requests' bodies joined, which protobuf reads as one request.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from agentlab.bench.ingest import PHOENIX_VERSION, Phoenix, phoenix_python, send_all, wait_until
from agentlab.bench.otlp_payload import agent_trace, bodies, export_order

START_TIMEOUT_S = 240
TIMEOUT_S = 600  # a 10,000-span trace took Phoenix 73 s to store here (bench_ingest)


def python() -> Path | None:
    """Phoenix's interpreter: AGENTLAB_PHOENIX_PYTHON, else the virtualenv scripts/test makes
    (once its install has completed)."""
    if explicit := os.environ.get("AGENTLAB_PHOENIX_PYTHON"):
        return Path(explicit) if Path(explicit).exists() else None
    found = phoenix_python()
    return found if (found.parent.parent / ".complete").exists() else None


def anchor(sizes: list[int]) -> dict[str, Any]:
    """{"version", "traces": [{spans, sent_s, counted_s, read_s, seconds, otlp}]} or
    {"skipped": why}. `seconds` is None when Phoenix did not hold the trace within TIMEOUT_S."""
    found = python()
    if found is None:
        return {"skipped": f"Phoenix {PHOENIX_VERSION} not installed ({phoenix_python()}; "
                           "scripts/test installs it, or set AGENTLAB_PHOENIX_PYTHON)"}
    out = []
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="phoenix-")))
        phoenix = Phoenix(found, folder)
        phoenix.start(stack, START_TIMEOUT_S)
        for i, n in enumerate(sizes):
            out.append(_one(phoenix, n, f"bench-traces-{i}-{n}"))
    return {"version": PHOENIX_VERSION, "traces": out}


def _one(phoenix: Phoenix, n: int, project: str) -> dict[str, Any]:
    trace = agent_trace(random.Random(n), project, n)
    payload = bodies(export_order([trace]))
    began = time.time()
    sent = send_all(phoenix.url, phoenix.headers, payload)
    sent_s = time.time() - began
    counted = wait_until(lambda: phoenix.span_count(project) >= n, TIMEOUT_S, 0.25)
    figures: dict[str, Any] = {"spans": n, "sent_s": sent_s, "dropped": sent.dropped,
                               "otlp": b"".join(body for _n, body in payload),
                               "counted_s": None, "read_s": None, "seconds": None}
    if counted is None:
        return figures
    read = time.time()
    held = phoenix.rest_span_count(project)
    done = time.time()
    figures |= {"counted_s": counted - began, "read_s": done - read,
                "seconds": done - began if held >= n else None}
    return figures
