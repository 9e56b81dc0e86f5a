"""Talking to the live-run socket /ws/runs/<id>/ the way a page does (a pytest plugin, loaded by
conftest.py, for the `stop_runs` fixture; the rest are plain helpers to import).

The real ASGI application with its origin check and session auth; CALL and ANSWER are the
calculator agent's script on the scripted model server (tests/fake_openai.py): one call of
6*7, then the answer."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from agentlab.asgi import application
from agentlab.runs import control as run_control
from agentlab.runs.registry import REGISTRY
from tests.fake_openai import Reply
from tests.waiting import await_until
from traces.models import Run
from traces.schema import ACTIVE_STATUSES

CALL = Reply(tool_calls=[("calculator", '{"expression": "6*7"}')])
ANSWER = Reply(text="6 times 7 is 42.")


@pytest.fixture
async def stop_runs():
    """Cancel every run these tests started and wait for each to record it."""
    yield
    entries = REGISTRY.entries()
    for entry in entries:
        if entry.control is not None:
            with contextlib.suppress(run_control.ControlError):
                entry.control.cancel()
    await asyncio.gather(*[e.task for e in entries if e.task and not e.task.done()],
                         return_exceptions=True)


def headers(user: Any = None) -> list[tuple[bytes, bytes]]:
    """A same-origin page's headers, logged in as `user` (none: anonymous)."""
    out = [(b"origin", b"http://127.0.0.1")]
    if user is not None:
        client = Client()
        client.force_login(user)
        out.append((b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()))
    return out


async def connect(run_id: int, user: Any = None) -> WebsocketCommunicator:
    hdrs = await sync_to_async(headers)(user)
    comm = WebsocketCommunicator(application, f"/ws/runs/{run_id}/", headers=hdrs)
    connected, _ = await comm.connect()
    assert connected
    return comm


async def frames_until(comm: WebsocketCommunicator, done, timeout: float = 10) -> list[dict]:
    """Frames up to and including the first for which done(frame) is true."""
    out: list[dict] = []
    async with asyncio.timeout(timeout):
        while True:
            frame = await comm.receive_json_from(timeout=timeout)
            out.append(frame)
            if done(frame):
                return out


def is_type(kind: str, **match: Any):
    return lambda f: f["type"] == kind and all(f.get(k) == v for k, v in match.items())


def paused(f: dict) -> bool:
    return f["type"] == "status" and f["status"] == "paused"


async def synced(comm: WebsocketCommunicator, last_seq: int = 0) -> list[dict]:
    await comm.send_json_to({"action": "sync", "last_seq": last_seq})
    return await frames_until(comm, is_type("synced"))


def new_seqs(frames: list[dict]) -> list[int]:
    seen, out = set(), []
    for f in frames:
        if f["type"] == "step" and f["seq"] not in seen:
            seen.add(f["seq"])
            out.append(f["seq"])
    return out


async def run_finished(run_id: int) -> None:
    """Until the run has ended and this process holds no control of it."""
    async def finished() -> bool:
        status = (await Run.objects.aget(pk=run_id)).status
        return run_control.get(run_id) is None and status not in ACTIVE_STATUSES

    await await_until(finished, message=f"run {run_id} finishes")
