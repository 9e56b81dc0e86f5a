"""`manage.py bench_ingest --profile`: the bench's requests through the receiver in this one
process — Django's ASGI application over channels' test communicators, its decoding thread
and writer thread included, a WebSocket watching the big trace's run as a page would — timed
in CPU seconds (time.process_time: every thread of the process), not wall-clock, so a figure
holds on a machine shared with other work. Where the time goes, every thread of it:
`py-spy record --format raw -o stacks.txt -- python manage.py bench_ingest --profile`.

Run in a fresh state folder (AGENTLAB_VAR_DIR=$(mktemp -d)): it migrates that database.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from channels.testing import HttpCommunicator, WebsocketCommunicator

from agentlab.bench.otlp_payload import (
    BATCH,
    Trace,
    agent_trace,
    agent_traces,
    bodies,
    export_order,
)

PROTOBUF = b"application/x-protobuf"


@dataclass
class Profiled:
    what: str
    spans: int
    cpu_s: float
    wall_s: float
    frames: int = 0  # step frames the watching socket got

    @property
    def cpu_us_per_span(self) -> float:
        return self.cpu_s * 1e6 / self.spans


def _prepare() -> tuple[str, list[tuple[bytes, bytes]]]:
    """Migrate, a user and its ingest token; a logged-in page's socket headers."""
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import Client

    from agentlab.tokens.models import create_token

    call_command("migrate", verbosity=0, interactive=False)
    user = User.objects.create_user(f"profile-{random.getrandbits(32)}", password=None)
    client = Client()
    client.force_login(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    page = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1"), (b"cookie", cookie)]
    return create_token(user, "profile", "ingest")[1], page


async def _post(app: Any, token: str, body: bytes) -> None:
    headers = [(b"host", b"127.0.0.1"), (b"content-type", PROTOBUF),
               (b"authorization", f"Bearer {token}".encode()),
               (b"content-length", str(len(body)).encode())]
    answer = await HttpCommunicator(app, "POST", "/v1/traces", body=body,
                                    headers=headers).get_response(timeout=60)
    if answer["status"] != 200:
        raise RuntimeError(f"the receiver answered {answer['status']}: {answer['body'][:300]!r}")


def _run_of(trace_id: str) -> int:
    from agentlab.receiver.models import ReceivedTrace

    return ReceivedTrace.objects.get(trace_id=trace_id).run_id


async def _drain(comm: WebsocketCommunicator, counted: list[int]) -> None:
    while True:
        frame = json.loads(await comm.receive_from(timeout=120))
        if frame["type"] == "step":
            counted[0] += 1
        elif frame["type"] == "final":
            return


async def _send(app: Any, token: str, cookie: list[tuple[bytes, bytes]], what: str,
                traces: list[Trace], watch: bool, batch: int) -> Profiled:
    payload = bodies(export_order(traces), batch)
    watch = watch and len(payload) > 1  # one request: the run is over before a page opens
    spans = sum(n for n, _ in payload)
    counted, drain, comm = [0], None, None
    began, cpu = time.perf_counter(), time.process_time()
    await _post(app, token, payload[0][1])
    if watch:  # a page opens the run once it exists, then gets every later step live
        run_id = await sync_to_async(_run_of)(traces[0].hex_id)
        comm = WebsocketCommunicator(app, f"/ws/runs/{run_id}/", headers=cookie)
        await comm.connect()
        await comm.send_json_to({"action": "sync", "last_seq": 0})
        while json.loads(await comm.receive_from(timeout=60))["type"] != "synced":
            pass
        drain = asyncio.ensure_future(_drain(comm, counted))
    for _n, body in payload[1:]:
        await _post(app, token, body)
    if drain is not None and comm is not None:
        await asyncio.wait_for(drain, 120)
        await comm.disconnect()
    return Profiled(what, spans, time.process_time() - cpu, time.perf_counter() - began,
                    counted[0])


async def _measure(spans: int, n_traces: int, trace_spans: int, watch: bool, batch: int
                   ) -> list[Profiled]:
    from channels.routing import get_default_application

    application = get_default_application()  # the project's, as daphne serves it
    token, cookie = await sync_to_async(_prepare)()
    rng = random.Random(7)
    await _send(application, token, cookie, "warm-up", [agent_trace(rng, "warm", 10)], False,
                batch)
    one = [agent_trace(rng, "profile-one", spans)]
    many = agent_traces(rng, "profile-many", n_traces, trace_spans)
    out = [await _send(application, token, cookie, f"1 trace × {spans:,} spans"
                       + (" (watched)" if watch else ""), one, watch, batch),
           await _send(application, token, cookie,
                       f"{n_traces:,} traces × {trace_spans} spans", many, False, batch)]
    return out


def profile(spans: int, n_traces: int, trace_spans: int, *, watch: bool = True,
            batch: int = BATCH) -> list[Profiled]:
    """CPU per span of the two throughput payloads through the receiver in this process,
    sent `batch` spans a request."""
    return asyncio.run(_measure(spans, n_traces, trace_spans, watch, batch))
