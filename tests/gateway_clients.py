"""The openai SDK pointed at the gateway (helpers for tests/test_gateway*.py and the browser
tests of gateway runs): over real HTTP to a daphne process (`live_url`), or in this process
through the ASGI application itself, so a test can hold a call and step it from the run's
socket in the same loop."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from typing import Any

import httpx2 as httpx
import openai
from django.test import AsyncClient

from agentlab.asgi import http
from agentlab.models import ModelProfile
from agentlab.tokens.models import create_token
from tests.fake_openai import FakeOpenAI, Reply
from tests.waiting import await_until
from traces.models import Run

QUESTION = "What is the weather in Paris?"
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather now in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]
CALL = Reply(tool_calls=[("get_weather", '{"city": "Paris"}')], usage=(40, 12))


def answer(weather: str) -> Reply:
    return Reply(text=f"In Paris it is {weather}.", usage=(60, 9))


def scripted_profile(server: FakeOpenAI, name: str = "scripted") -> ModelProfile:
    return ModelProfile.objects.create(name=name, base_url=server.base_url,
                                       model="scripted-model", retries=0, timeout_s=5)


# The HTTP side of agentlab.asgi.application (body caps, the gateway's fast path, Django),
# without what the first request starts in a server process (the live scorers' thread).
APP = http


def in_process(token: str, base: str = "/gateway/v1", **options: Any) -> openai.AsyncOpenAI:
    transport = httpx.ASGITransport(app=APP)
    return openai.AsyncOpenAI(base_url=f"http://testserver{base}", api_key=token,
                              http_client=httpx.AsyncClient(transport=transport), max_retries=0,
                              **options)


def over_http(url: str, token: str, base: str = "/gateway/v1") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}{base}", api_key=token, max_retries=0, timeout=20)


async def weather_agent(client: openai.AsyncOpenAI, weather: str = "sunny, 21 °C", *,
                        model: str = "scripted", stream: bool = False,
                        headers: dict[str, str] | None = None) -> tuple[str, list[Any]]:
    """A plain tool loop, as people write one: ask, run the tool the model calls, ask again."""
    messages: list[Any] = [{"role": "system", "content": "You answer weather questions."},
                           {"role": "user", "content": QUESTION}]
    for _ in range(4):
        if stream:
            text, calls = "", {}
            async for chunk in await client.chat.completions.create(
                    model=model, messages=messages, tools=TOOLS, stream=True,
                    extra_headers=headers):
                delta = chunk.choices[0].delta if chunk.choices else None
                text += (delta.content or "") if delta else ""
                for call in (delta.tool_calls or []) if delta else []:
                    calls[call.index] = call
            message = {"role": "assistant", "content": text or None}
            if calls:
                message["tool_calls"] = [
                    {"id": c.id, "type": "function",
                     "function": {"name": c.function.name, "arguments": c.function.arguments}}
                    for c in calls.values()]
        else:
            reply = await client.chat.completions.create(model=model, messages=messages,
                                                         tools=TOOLS, extra_headers=headers)
            message = reply.choices[0].message.model_dump(exclude_none=True)
        messages.append(message)
        if not message.get("tool_calls"):
            return message.get("content") or "", messages
        for call in message["tool_calls"]:
            json.loads(call["function"]["arguments"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": weather})
    return "no answer", messages


async def open_session(token: str, **fields: Any) -> dict[str, Any]:
    """POST /gateway/sessions as `manage.py attach` does: the new session's JSON."""
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=APP),
                                 base_url="http://testserver") as http:
        response = await http.post("/gateway/sessions", json=fields,
                                   headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 201, response.text
    return response.json()


async def control(user, run_id: int, **frame):
    """POST a control frame to /runs/<id>/control as `user` (logged in), as a page would."""
    client = AsyncClient()
    await client.aforce_login(user)
    return await client.post(f"/runs/{run_id}/control", frame, content_type="application/json")


async def paused_run(user) -> Run:
    """`user`'s run held at a breakpoint, once there is one (10 s at most)."""
    async def paused():
        run = await Run.objects.filter(user=user, status="paused").afirst()
        return run

    return await await_until(paused, timeout=10)


def from_the_tool_result(body: dict) -> Reply:
    """A tool call first; then an answer that repeats the tool result the model was sent."""
    tool = [m for m in body.get("messages") or [] if m.get("role") == "tool"]
    return Reply(text=f"In Paris it is {tool[-1]['content']}.") if tool else CALL


class ThreadAgent(threading.Thread):
    """`weather_agent` of tests/gateway_clients.py, synchronous, in a thread: its answer, or
    the error its SDK raised, once it ends."""

    def __init__(self, client: Any, weather: str = "sunny, 21 °C") -> None:
        super().__init__(daemon=True)
        self.client, self.weather = client, weather
        self.answer: str | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        messages: list[Any] = [{"role": "system", "content": "You answer weather questions."},
                               {"role": "user", "content": QUESTION}]
        try:
            for _ in range(4):
                reply = self.client.chat.completions.create(model="scripted", messages=messages,
                                                            tools=TOOLS)
                message = reply.choices[0].message.model_dump(exclude_none=True)
                messages.append(message)
                if not message.get("tool_calls"):
                    self.answer = message.get("content") or ""
                    return
                for call in message["tool_calls"]:
                    messages.append({"role": "tool", "tool_call_id": call["id"],
                                     "content": self.weather})
        except BaseException as exc:  # noqa: BLE001 - the test says what the agent got
            self.error = exc

    def result(self) -> str:
        self.join(20)
        assert not self.is_alive(), "the agent is still waiting for the gateway"
        assert self.error is None, self.error
        return self.answer or ""


def post(url: str, token: str, body: dict) -> dict:
    """POST JSON with the token, as `manage.py attach` does; the answer's JSON."""
    request = urllib.request.Request(url, json.dumps(body).encode(), method="POST", headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def held_run(user, timeout_s: float = 15) -> Run:
    """`user`'s run held at a breakpoint (synchronous: for the browser tests)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = Run.objects.filter(user=user, status="paused").first()
        if run is not None:
            return run
        time.sleep(0.1)
    raise AssertionError("no gateway run was held at a breakpoint")


def agent_in_session(live_url: str, user, fake_llm, debug: dict) -> tuple[ThreadAgent, str, str]:
    """The agent started in a gateway session opened with `debug`; its token and session."""
    scripted_profile(fake_llm)
    fake_llm.responder = from_the_tool_result
    token = create_token(user, "my agent", "gateway")[1]
    session = post(f"{live_url}/gateway/sessions", token,
                   {"name": "weather agent", "debug": debug})["session"]
    agent = ThreadAgent(over_http(live_url, token, f"/gateway/s/{session}/v1"))
    agent.start()
    return agent, token, session


async def written() -> None:
    """Every step the gateway has answered for, written: a finished step's row goes to the
    recorder once its reply is out (agentlab/gateway/later.py), so a test that reads the rows
    right after a reply waits for this first."""
    from agentlab.gateway.sessions import TABLE

    for session in list(TABLE.sessions.values()):
        await session.later.drain()
        await session.recorder.durable()
