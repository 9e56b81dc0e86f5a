"""What the run's page shows of a gateway call while it is answered (docs/GATEWAY.md
"Performance"): a quick call appears once answered; a slow one shows as running while the
agent waits for it; both end as the step with the reply the agent got."""

from __future__ import annotations

import asyncio
import json

import pytest

from agentlab.gateway import later
from tests.fake_openai import Delay, Reply
from tests.gateway_clients import APP, QUESTION, in_process
from tests.waiting import await_until
from traces.models import Run, Step

pytestmark = pytest.mark.django_db(transaction=True)


async def llm_steps(user) -> list[tuple[str, str]]:
    return [(s.status, s.text) async for s in
            Step.objects.filter(run__user=user, kind="llm").order_by("seq")]


async def shown(user, expected: list[tuple[str, str]], timeout: float = 10) -> None:
    async def now() -> bool:
        return await llm_steps(user) == expected

    await await_until(now, timeout=timeout, message=f"the llm steps become {expected}")


async def test_a_slow_call_shows_as_running_while_the_agent_waits(user, token, profile, fake_llm,
                                                                ended, monkeypatch):
    monkeypatch.setattr(later, "SLOW_S", 0.2)
    fake_llm.script(Delay(1.5, Reply(text="Sunny.")), Reply(text="Still sunny."))
    client = in_process(token)
    messages = [{"role": "user", "content": QUESTION}]
    call = asyncio.create_task(client.chat.completions.create(model="scripted",
                                                              messages=messages))
    # The model has not answered yet: the page shows the call in flight.
    await shown(user, [("running", "")], timeout=1.2)
    reply = await call
    assert reply.choices[0].message.content == "Sunny."
    await shown(user, [("ok", "Sunny.")])
    # The agent's next call, answered at once: shown once answered, as the agent got it.
    messages += [{"role": "assistant", "content": "Sunny."},
                 {"role": "user", "content": "And now?"}]
    again = await client.chat.completions.create(model="scripted", messages=messages)
    assert again.choices[0].message.content == "Still sunny."
    await shown(user, [("ok", "Sunny."), ("ok", "Still sunny.")])
    assert await Run.objects.filter(user=user).acount() == 1


async def test_an_agent_that_hangs_up_before_the_reply_has_its_call_ended(user, token, profile,
                                                                         fake_llm, ended):
    """The client going away cancels the call it waits for (agentlab/fast_api.py):
    the step ends saying so, and nothing is sent on the closed connection."""
    fake_llm.script(Delay(2.0, Reply(text="Too late.")))
    body = json.dumps({"model": "scripted", "messages": [{"role": "user", "content": QUESTION}]})
    hang_up, sent = asyncio.Event(), []
    arrived = [{"type": "http.request", "body": body.encode(), "more_body": False}]

    async def receive() -> dict:
        if arrived:
            return arrived.pop()
        await hang_up.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": "/gateway/v1/chat/completions",
             "raw_path": b"/gateway/v1/chat/completions", "query_string": b"",
             "root_path": "", "server": ("testserver", 80), "client": ("127.0.0.1", 5000),
             "headers": [(b"host", b"testserver"), (b"content-type", b"application/json"),
                         (b"authorization", f"Bearer {token}".encode())]}
    call = asyncio.create_task(APP(scope, receive, send))
    await await_until(lambda: fake_llm.requests, timeout=5, message="the call reaches the model")
    hang_up.set()
    await asyncio.wait_for(call, 5)  # well before the model's 2 s
    assert sent == []
    await shown(user, [("error", "the client closed the connection before the reply")])
