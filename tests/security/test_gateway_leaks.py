"""What the gateway must not let out: what a guardrail redacted (from the rows, the run socket,
/runs/<id>/control and the export), a profile's key (from any answer, error or record), and
anything about Agent Lab or the user upstream (a direct call's request and no more). The
access side of the gateway is test_gateway_hostile.py."""

from __future__ import annotations

import asyncio
import json

import openai
import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from agentlab.gateway.models import GatewayRoute
from agentlab.gateway.sessions import TABLE
from agentlab.models import Agent, Guardrail
from agentlab.tokens.models import create_token
from tests.fake_openai import Fail, Reply
from tests.gateway_clients import in_process, open_session, scripted_profile, written
from tests.sockets import connect, frames_until
from tests.waiting import await_until
from traces.models import Run, Step

pytestmark = pytest.mark.django_db(transaction=True)
EMAIL = "alice.secret@example.com"
API_KEY = "sk-proj-" + "Zq8Xw7Vu6Ts5Rq4Po3Nm2Lk1"
TOOLS = [{"type": "function", "function": {
    "name": "send_mail", "description": "Send a mail.",
    "parameters": {"type": "object", "properties": {"to": {"type": "string"}}}}}]


@pytest.fixture
async def token(user) -> str:
    return (await sync_to_async(create_token)(user, "agent", "gateway"))[1]


def guardrail(name: str, kind: str, *, action: str = "redact", stage: str = "output",
              everywhere: bool = False) -> Guardrail:
    return Guardrail.objects.create(name=name, kind=kind, action=action, stage=stage,
                                    applies_to_all=everywhere)


def routed(profile, *checks: Guardrail) -> str:
    """A model name the admin routes to `profile`, with an agent whose guardrails these are."""
    agent = Agent.objects.create(name="Mailer", paradigm="react", model_profile=profile)
    agent.guardrails.set(checks)
    GatewayRoute.objects.create(model_name="gpt-4o-mini", profile=profile, agent=agent)
    return "gpt-4o-mini"


async def mailer(client: openai.AsyncOpenAI, model: str) -> str:
    """An agent that mails what it is told, its tool's result quoting the address and key."""
    messages = [{"role": "user", "content": f"Mail the weather to {EMAIL}; my key: {API_KEY}"}]
    for _ in range(3):
        reply = await client.chat.completions.create(model=model, messages=messages,
                                                     tools=TOOLS)
        message = reply.choices[0].message.model_dump(exclude_none=True)
        messages.append(message)
        if not message.get("tool_calls"):
            return message["content"]
        for call in message["tool_calls"]:
            messages.append({"role": "tool", "tool_call_id": call["id"],
                             "content": f"sent to {EMAIL} with {API_KEY}"})
    return ""


def recorded(run_id: int) -> str:
    """Everything the database keeps of the run, as one text."""
    run = Run.objects.get(pk=run_id)
    rows = [{f: getattr(s, f) for f in ("name", "input", "output", "text", "meta")}
            for s in Step.objects.filter(run_id=run_id)]
    return json.dumps([run.input, run.final_answer, run.error, run.agent_snapshot,
                       run.agent_name, rows], default=str)


def hidden(text: str) -> bool:
    return EMAIL not in text and API_KEY not in text


@pytest.mark.parametrize("where", ["route's agent", "every agent"])
async def test_redacted_text_reaches_no_row_socket_control_or_export(where, user, token,
                                                                    profile, fake_llm, ended):
    email = await sync_to_async(guardrail)("emails", "email", everywhere=where == "every agent")
    keys = await sync_to_async(guardrail)("keys", "api_key", everywhere=where == "every agent")
    model = (await sync_to_async(routed)(profile, email, keys) if where == "route's agent"
             else "scripted")
    fake_llm.script(Reply(tool_calls=[("send_mail", json.dumps({"to": EMAIL}))]),
                    Reply(text=f"Done: mailed {EMAIL}."))
    key = (await open_session(token, debug={"break_tools": ["send_mail"]}))["session"]
    agent = asyncio.ensure_future(mailer(in_process(token, f"/gateway/s/{key}/v1"), model))
    run = await await_until(lambda: Run.objects.filter(user=user, status="paused").afirst())
    page = AsyncClient()
    await page.aforce_login(user)
    state = await page.get(f"/runs/{run.pk}/control")
    assert state.json()["detail"]["pending"]["kind"] == "tool"
    comm = await connect(run.pk, user)
    await comm.send_json_to({"action": "sync", "last_seq": 0})
    frames = await frames_until(comm, lambda f: f["type"] == "synced")
    assert (await page.post(f"/runs/{run.pk}/control", {"action": "resume"},
                            content_type="application/json")).status_code == 200
    assert await asyncio.wait_for(agent, 10) == f"Done: mailed {EMAIL}."  # the agent's own
    await TABLE.close_quiet(0)
    frames += await frames_until(comm, lambda f: f["type"] == "status"
                                 and f["status"] == "succeeded")
    await comm.disconnect()
    export = await page.get(f"/runs/{run.pk}/export/")
    assert export.status_code == 200
    texts = {"the control's state": state.content.decode(), "the socket": json.dumps(frames),
             "the rows": await sync_to_async(recorded)(run.pk),
             "the export": export.content.decode()}
    assert [name for name, text in texts.items() if not hidden(text)] == []
    assert "[redacted: email]" in texts["the rows"]


async def test_a_held_call_that_timed_out_is_recorded_redacted(user, token, profile, fake_llm,
                                                               ended):
    from django.test import override_settings

    await sync_to_async(guardrail)("emails", "email", everywhere=True)
    fake_llm.script(Reply(tool_calls=[("send_mail", json.dumps({"to": EMAIL}))]))
    with override_settings(AGENTLAB_GATEWAY_HOLD_S=0.3):
        key = (await open_session(token, debug={"break_tools": ["send_mail"]}))["session"]
        with pytest.raises(openai.InternalServerError, match="held at a breakpoint"):
            await mailer(in_process(token, f"/gateway/s/{key}/v1"), "scripted")
    await written()  # the held step's row goes after the 504
    run = await Run.objects.aget(user=user)
    tool = await Step.objects.aget(run=run, kind="tool")
    assert tool.status == "error" and tool.input == {"to": "[redacted: email]"}
    assert EMAIL not in await sync_to_async(recorded)(run.pk)


async def test_a_blocking_guardrail_answers_the_agent_400_guardrail_blocked(user, token,
                                                                            profile, fake_llm,
                                                                            ended):
    await sync_to_async(guardrail)("no keys in", "api_key", action="block", stage="input",
                                   everywhere=True)
    client = in_process(token)
    with pytest.raises(openai.BadRequestError) as raised:
        await client.chat.completions.create(model="scripted", messages=[
            {"role": "user", "content": f"use {API_KEY}"}])
    assert raised.value.code == "guardrail_blocked" and "no keys in" in raised.value.message
    assert not fake_llm.requests and not await Run.objects.aexists()
    # A reply that carries a key is stopped too: recorded masked, never handed to the agent.
    await sync_to_async(guardrail)("no keys out", "api_key", action="block", everywhere=True)
    fake_llm.script(Reply(text=f"Here is one: {API_KEY}"))
    with pytest.raises(openai.BadRequestError) as raised:
        await client.chat.completions.create(model="scripted", messages=[
            {"role": "user", "content": "give me a key"}])
    assert raised.value.code == "guardrail_blocked" and API_KEY not in raised.value.response.text
    run = await Run.objects.aget(user=user)
    await TABLE.close_quiet(0)
    assert hidden(await sync_to_async(recorded)(run.pk))


async def test_embeddings_pass_the_input_guardrails_too(user, token, profile, fake_llm):
    await sync_to_async(guardrail)("emails in", "email", stage="input", everywhere=True)
    await sync_to_async(guardrail)("no keys in", "api_key", action="block", stage="input",
                                   everywhere=True)
    client = in_process(token)
    await client.embeddings.with_raw_response.create(model="scripted",
                                                     input=["weather", f"mail {EMAIL}"])
    assert fake_llm.requests[-1]["input"] == ["weather", "mail [redacted: email]"]
    with pytest.raises(openai.BadRequestError) as raised:
        await client.embeddings.create(model="scripted", input=f"key {API_KEY}")
    assert raised.value.code == "guardrail_blocked" and len(fake_llm.requests) == 1


async def test_a_profiles_key_appears_in_no_answer_error_or_record(user, token, fake_llm,
                                                                   monkeypatch, ended):
    secret = "sk-test-" + "S3cr3tV4lu3NeverShown0123"
    monkeypatch.setenv("AGENTLAB_TEST_SECRET_KEY", secret)
    profile = await sync_to_async(scripted_profile)(fake_llm)
    profile.api_key_env = "AGENTLAB_TEST_SECRET_KEY"
    await profile.asave()
    client = in_process(token)
    fake_llm.script(Reply(text="fine"))  # a good call first: its answer holds no key either
    reply = await client.chat.completions.with_raw_response.create(
        model="scripted", messages=[{"role": "user", "content": "hi"}])
    assert secret not in reply.text and fake_llm.headers[-1]["authorization"] == f"Bearer {secret}"
    echoed = Fail(401, f"Incorrect API key provided: {secret}.", "invalid_api_key")
    fake_llm.script(echoed, echoed)
    with pytest.raises(openai.APIStatusError) as raised:
        await client.chat.completions.create(model="scripted", messages=[
            {"role": "user", "content": "again"}])
    assert raised.value.status_code == 502 and "AGENTLAB_TEST_SECRET_KEY" in raised.value.message
    assert secret not in str(raised.value) and secret not in raised.value.response.text
    embedded = await client.embeddings.with_raw_response.create(model="scripted", input="hi")
    assert embedded.status_code == 200 and secret not in embedded.text
    await TABLE.close_quiet(0)
    assert all([secret not in await sync_to_async(recorded)(r.pk)
                async for r in Run.objects.all()])


async def test_upstream_learns_nothing_a_direct_call_would_not_tell_it(user, token, profile,
                                                                       fake_llm, ended):
    key = (await open_session(token, name="weather.py"))["session"]
    trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    fake_llm.script(Reply(text="fine"), Reply(text="still fine"))
    client = in_process(token, f"/gateway/s/{key}/v1")
    extra = {"traceparent": trace, "tracestate": "agentlab=1", "baggage": "user=alice",
             "Cookie": "sessionid=abc; csrftoken=def", "OpenAI-Organization": "org-alice"}
    await client.chat.completions.create(model="scripted", extra_headers=extra, messages=[
        {"role": "user", "content": "hi"}])
    await client.chat.completions.create(model="scripted", stream=True, extra_headers=extra,
                                         messages=[{"role": "user", "content": "hi again"}])
    run = await Run.objects.aget(user=user)
    for headers, body in zip(fake_llm.headers, fake_llm.requests, strict=True):
        assert not {"cookie", "traceparent", "tracestate", "baggage", "openai-organization"
                    } & set(headers)
        assert headers["authorization"] == "Bearer not-needed"  # the profile's, no key set
        seen = json.dumps([headers, body])
        for leaked in (token, key, trace.split("-")[1], "alice", "sessionid", f"/runs/{run.pk}"):
            assert leaked not in seen
        assert not [h for h in headers if "agentlab" in h]


async def test_credentials_in_a_profiles_url_appear_in_no_error_or_record(user, token, ended):
    from agentlab.models import ModelProfile

    await ModelProfile.objects.acreate(
        name="private", model="m", retries=0, timeout_s=2,
        base_url="http://agent:hunter2pass@127.0.0.1:9/v1?api-key=hunter3key")
    client = in_process(token)
    for ask in (client.chat.completions.create(model="private", messages=[
                    {"role": "user", "content": "hi"}]),
                client.embeddings.create(model="private", input="hi")):
        with pytest.raises(openai.APIStatusError) as raised:
            await ask
        assert raised.value.status_code == 502, raised.value.message
        assert "127.0.0.1:9" in raised.value.message  # where it failed is said...
        for secret in ("hunter2pass", "hunter3key"):  # ...without what the URL carries
            assert secret not in raised.value.response.text
    await TABLE.close_quiet(0)
    run = await Run.objects.aget(user=user)
    assert "hunter" not in await sync_to_async(recorded)(run.pk)
