"""The run page of a gateway run (traces/views/run.py, templates/live/panel.html): what it
says of the outside agent, the links between its gateway run and its received run (one trace
id), and that a held call shows only what the guardrails let through. The agents are openai
SDK loops through the ASGI application (tests/gateway_clients.py); the spans are the
OpenTelemetry SDK's own (tests/otlp_spans.py). The page's controls in Chromium:
tests/browser/test_gateway_live.py."""

from __future__ import annotations

import asyncio

import pytest
from django.test import AsyncClient

from agentlab.receiver.models import ReceivedTrace
from agentlab.tokens.models import create_token
from tests.billing import EMAIL, guardrail
from tests.gateway_clients import (
    CALL,
    answer,
    control,
    in_process,
    open_session,
    paused_run,
    scripted_profile,
    weather_agent,
)
from tests.otlp_spans import AgentTrace, encoded
from traces.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


async def page_of(user, run_id: int) -> str:
    client = AsyncClient()
    await client.aforce_login(user)
    response = await client.get(f"/runs/{run_id}/")
    assert response.status_code == 200
    return response.content.decode()


async def traced_agent(user, fake_llm) -> tuple[int, int, str]:
    """An agent that sends its spans to the receiver and calls its model through the gateway
    with the same trace's traceparent: (its gateway run, its received run, the trace id)."""
    await ReceivedTrace.objects.filter(user=user).adelete()
    spans = AgentTrace()
    spans.start()
    spans.llm_asks_tool()
    trace = f"{spans.root.get_span_context().trace_id:032x}"
    ingest = (await asyncio.to_thread(create_token, user, "spans", "ingest"))[1]
    sent = await AsyncClient().post("/v1/traces", encoded(spans.ended),
                                    content_type="application/x-protobuf",
                                    headers={"Authorization": f"Bearer {ingest}"})
    assert sent.status_code == 200
    token = (await asyncio.to_thread(create_token, user, "agent", "gateway"))[1]
    fake_llm.script(answer("sunny"))
    await in_process(token).chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": "Weather in Paris?"}],
        extra_headers={"traceparent": f"00-{trace}-00f067aa0ba902b7-01"})
    gateway = await Run.objects.filter(user=user, agent_snapshot__gateway__trace_id=trace).aget()
    received = await ReceivedTrace.objects.aget(user=user, trace_id=trace)
    return gateway.pk, received.run_id, trace


async def test_a_gateway_run_says_whose_it_is_and_links_to_its_received_run(user, fake_llm,
                                                                           ended):
    await asyncio.to_thread(scripted_profile, fake_llm)
    gateway, received, trace = await traced_agent(user, fake_llm)
    page = await page_of(user, gateway)
    assert "An outside agent, through the gateway" in page
    assert "called the model <code>scripted</code>" in page
    assert "one run by its traceparent trace id" in page
    assert f'The same trace <code>{trace}</code>' in page
    assert f'href="/runs/{received}/">run {received}</a>' in page
    back = await page_of(user, received)
    assert f'href="/runs/{gateway}/">run {gateway}</a>' in back
    assert "its model calls through the gateway" in back
    # Agent Lab's own live controls, with the gateway's breakpoints, on the gateway run
    assert 'name="break_kinds" value="llm"> Hold every LLM call' in page
    assert "Hold every tool result" in page


async def test_another_users_run_of_the_same_trace_id_is_not_linked(user, other_user,
                                                                    fake_llm, ended):
    await asyncio.to_thread(scripted_profile, fake_llm)
    mine, received, trace = await traced_agent(user, fake_llm)
    token = (await asyncio.to_thread(create_token, other_user, "agent", "gateway"))[1]
    fake_llm.script(answer("rainy"))
    await in_process(token).chat.completions.create(  # a trace id is the sender's to choose
        model="scripted", messages=[{"role": "user", "content": "Weather in Rome?"}],
        extra_headers={"traceparent": f"00-{trace}-00f067aa0ba902b8-01"})
    theirs = await Run.objects.aget(user=other_user)
    back = await page_of(user, received)
    assert f"/runs/{mine}/" in back and f"/runs/{theirs.pk}/" not in back
    assert f"/runs/{received}/" not in await page_of(other_user, theirs.pk)


async def test_a_held_tool_result_is_shown_as_the_guardrails_let_it_through(user, fake_llm,
                                                                          ended):
    await asyncio.to_thread(scripted_profile, fake_llm)
    await asyncio.to_thread(guardrail)
    token = (await asyncio.to_thread(create_token, user, "agent", "gateway"))[1]
    fake_llm.script(CALL, answer("mild"))
    session = await open_session(token, debug={"break_tools": ["get_weather"]})
    agent = asyncio.ensure_future(weather_agent(
        in_process(token, f"/gateway/s/{session['session']}/v1"), f"mild; ask {EMAIL}"))
    run = await paused_run(user)
    client = AsyncClient()
    await client.aforce_login(user)
    state = (await client.get(f"/runs/{run.pk}/control")).json()
    pending = state["detail"]["pending"]
    assert pending["kind"] == "tool" and pending["meta"]["ran_by"] == "agent"
    assert pending["text"].startswith("mild; ask [redacted")  # what the agent sent, redacted
    assert EMAIL not in str(state)
    assert EMAIL not in str((await Run.objects.aget(pk=run.pk)).__dict__)
    # Sent back as shown (redacted): not an edit, the model reads what the agent sent.
    await control(user, run.pk, action="edit", seq=2, input={"observation": pending["text"]})
    await control(user, run.pk, action="resume")
    said, _ = await asyncio.wait_for(agent, 10)
    assert said == "In Paris it is mild."
    assert fake_llm.requests[-1]["messages"][-1]["content"] == f"mild; ask {EMAIL}"


async def test_a_held_llm_call_shows_its_request_as_the_guardrails_let_it_through(user, fake_llm,
                                                                                 ended):
    await asyncio.to_thread(scripted_profile, fake_llm)
    await asyncio.to_thread(guardrail)
    token = (await asyncio.to_thread(create_token, user, "agent", "gateway"))[1]
    fake_llm.script(answer("mild"))
    session = await open_session(token, debug={"break_kinds": ["llm"]})
    call = asyncio.ensure_future(in_process(token, f"/gateway/s/{session['session']}/v1")
                                 .chat.completions.create(model="scripted", messages=[
                                     {"role": "user", "content": f"Weather for {EMAIL}?"}]))
    run = await paused_run(user)
    client = AsyncClient()
    await client.aforce_login(user)
    state = (await client.get(f"/runs/{run.pk}/control")).json()
    shown = state["detail"]["pending"]["input"]["messages"][0]["content"]
    assert shown.startswith("Weather for [redacted") and EMAIL not in str(state)
    # The page sends the whole request back, one field changed: the rest is the agent's own.
    edited = {**state["detail"]["pending"]["input"], "temperature": 0.25}
    edited.pop("params", None)
    assert (await control(user, run.pk, action="edit", seq=1, input=edited)).status_code == 200
    await control(user, run.pk, action="resume")
    reply = await asyncio.wait_for(call, 10)
    assert reply.choices[0].message.content == "In Paris it is mild."
    sent = fake_llm.requests[-1]
    assert EMAIL in sent["messages"][0]["content"] and sent["temperature"] == 0.25
