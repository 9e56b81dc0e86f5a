"""The OpenAI-compatible gateway (/gateway/v1): an agent's calls become one live run.

The agents here are plain openai SDK loops (tests/gateway_clients.py) talking to the ASGI
application, the gateway forwarding to the scripted model server over loopback; the
frameworks' own agents run through it in tests/test_gateway_frameworks.py."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from agentlab.gateway.sessions import TABLE
from agentlab.tokens.models import create_token
from tests.gateway_clients import (
    CALL,
    QUESTION,
    TOOLS,
    answer,
    in_process,
    scripted_profile,
    weather_agent,
)
from traces.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def token(user):
    return create_token(user, "my agent", "gateway")[1]


@pytest.fixture
def profile(fake_llm):
    return scripted_profile(fake_llm)


def steps_of(run_id: int) -> list[tuple]:
    return [(s.seq, s.kind, s.name, s.status)
            for s in Run.objects.get(pk=run_id).steps.order_by("seq")]


@pytest.fixture
async def ended():
    """End every gateway run the test left open (as the quiet closer would)."""
    yield
    await TABLE.close_quiet(0)


async def test_a_tool_loop_is_one_run_of_llm_tool_llm_steps(user, token, profile, fake_llm, ended):
    fake_llm.script(CALL, answer("sunny, 21 °C"))
    said, messages = await weather_agent(in_process(token))
    assert said == "In Paris it is sunny, 21 °C."
    run = await Run.objects.aget(user=user)
    assert run.status == "running" and run.input == QUESTION
    await TABLE.close_quiet(0)
    run = await Run.objects.aget(pk=run.pk)
    assert run.status == "succeeded" and run.final_answer == said
    assert (run.llm_calls, run.tool_calls, run.tokens_in, run.tokens_out) == (2, 1, 100, 21)
    steps = await sync_to_async(steps_of)(run.pk)
    assert [s[1:] for s in steps] == [("llm", "scripted-model", "ok"),
                                      ("tool", "get_weather", "ok"),
                                      ("llm", "scripted-model", "ok"),
                                      ("final", "", "ok")]
    tool = await run.steps.aget(kind="tool")
    assert tool.input == {"city": "Paris"} and tool.text == "sunny, 21 °C"
    # The upstream got the agent's conversation as sent, the tool result included.
    assert fake_llm.requests[-1]["messages"][-1] == messages[3]
    assert messages[3]["tool_call_id"] == messages[2]["tool_calls"][0]["id"]


async def test_a_streamed_loop_reads_the_same_and_is_recorded_the_same(user, token, profile,
                                                                       fake_llm, ended):
    fake_llm.script(CALL, answer("rain, 12 °C"))
    said, _ = await weather_agent(in_process(token), "rain, 12 °C", stream=True)
    assert said == "In Paris it is rain, 12 °C."
    run = await Run.objects.aget(user=user)
    assert [s[1:3] for s in await sync_to_async(steps_of)(run.pk)] == [
        ("llm", "scripted-model"), ("tool", "get_weather"), ("llm", "scripted-model")]
    assert all(r.get("stream") for r in fake_llm.requests)


async def test_two_agents_asking_the_same_question_at_once_stay_two_runs(user, token, profile,
                                                                         fake_llm, ended):
    import asyncio

    fake_llm.script(CALL, CALL, answer("sunny"), answer("sunny"))
    client = in_process(token)
    said = await asyncio.gather(weather_agent(client, "sunny"), weather_agent(client, "sunny"))
    assert [s for s, _ in said] == ["In Paris it is sunny."] * 2
    runs = [r async for r in Run.objects.filter(user=user).order_by("pk")]
    assert len(runs) == 2
    for run in runs:
        assert [s[1] for s in await sync_to_async(steps_of)(run.pk)] == ["llm", "tool", "llm"]


async def test_a_traceparent_groups_calls_that_share_no_conversation(user, token, profile,
                                                                     fake_llm, ended):
    fake_llm.script(answer("a"), answer("b"), answer("c"))
    client = in_process(token)
    trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    for text in ("plan it", "do it"):
        await client.chat.completions.create(model="scripted", extra_headers={"traceparent": trace},
                                             messages=[{"role": "user", "content": text}])
    await client.chat.completions.create(model="scripted",
                                         messages=[{"role": "user", "content": "alone"}])
    counts = [await Run.objects.filter(pk=r.pk).values_list("pk", flat=True).acount()
              async for r in Run.objects.filter(user=user)]
    runs = [r async for r in Run.objects.filter(user=user).order_by("pk")]
    assert len(runs) == 2 and counts == [1, 1]
    assert [s[1] for s in await sync_to_async(steps_of)(runs[0].pk)] == ["llm", "llm"]
    assert runs[0].agent_snapshot["gateway"]["trace_id"] == trace.split("-")[1]


async def open_session(token: str, **fields) -> dict:
    import httpx2 as httpx

    from agentlab.asgi import application

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=application),
                                 base_url="http://testserver") as http:
        response = await http.post("/gateway/sessions", json=fields,
                                   headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 201, response.text
    return response.json()


async def end_session(token: str, key: str, exit_code: int = 0) -> dict:
    import httpx2 as httpx

    from agentlab.asgi import application

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=application),
                                 base_url="http://testserver") as http:
        response = await http.post(f"/gateway/sessions/{key}/end", json={"exit_code": exit_code},
                                   headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    return response.json()


async def recorded_run(token: str, fake_llm, weather: str = "sunny, 21 °C") -> int:
    fake_llm.script(CALL, answer(weather))
    session = await open_session(token, name="weather.py")
    await weather_agent(in_process(token, f"/gateway/s/{session['session']}/v1"), weather)
    return (await end_session(token, session["session"]))["run"]


async def test_a_replay_answers_from_the_record_without_calling_the_model(user, token, profile,
                                                                         fake_llm, ended):
    source = await recorded_run(token, fake_llm)
    asked = len(fake_llm.requests)
    session = await open_session(token, mode="replay", source=source)
    said, _ = await weather_agent(in_process(token, f"/gateway/s/{session['session']}/v1"))
    state = await end_session(token, session["session"])
    assert said == "In Paris it is sunny, 21 °C." and len(fake_llm.requests) == asked
    replay = await Run.objects.aget(pk=state["run"])
    assert replay.parent_run_id == source and replay.status == "succeeded"
    llm = [s async for s in replay.steps.filter(kind="llm").order_by("seq")]
    assert [(s.meta.get("replayed"), s.meta.get("source_seq")) for s in llm] == [(True, 1),
                                                                                (True, 3)]
    assert "first_divergence" not in replay.agent_snapshot


async def test_a_replay_says_where_the_program_left_its_record_then_goes_live(
        user, token, profile, fake_llm, ended):
    source = await recorded_run(token, fake_llm)
    fake_llm.script(answer("rain, 12 °C"))
    session = await open_session(token, mode="replay", source=source)
    said, _ = await weather_agent(in_process(token, f"/gateway/s/{session['session']}/v1"),
                                  "rain, 12 °C")  # the tool says otherwise this time
    state = await end_session(token, session["session"])
    assert said == "In Paris it is rain, 12 °C."
    divergence = state["first_divergence"]
    assert divergence["seq"] == 3 and divergence["source_seq"] == 3
    assert "message 4 (tool)" in divergence["detail"]


async def test_a_fork_at_a_tool_result_puts_the_edit_in_every_later_request(
        user, token, profile, fake_llm, ended):
    source = await recorded_run(token, fake_llm)
    fake_llm.script(answer("snowing"))
    session = await open_session(token, mode="fork", source=source, fork_seq=2,
                                 edit={"observation": "snowing"})
    said, _ = await weather_agent(in_process(token, f"/gateway/s/{session['session']}/v1"))
    state = await end_session(token, session["session"])
    assert said == "In Paris it is snowing."
    # Served from the record up to the fork, the edit in place of the agent's own result.
    assert fake_llm.requests[-1]["messages"][-1]["content"] == "snowing"
    fork = await Run.objects.aget(pk=state["run"])
    assert (fork.parent_run_id, fork.fork_seq) == (source, 2)
    tool = await fork.steps.aget(kind="tool")
    assert tool.text == "snowing" and tool.meta["edited"] is True
    # The diff with the original points at the edited tool result first.
    assert await sync_to_async(first_difference)(source, fork.pk) == ("tool", 2, 2)


def first_difference(a: int, b: int) -> tuple[str, int, int]:
    from traces.diff import diff_steps
    from traces.models import Step

    steps = [[s.to_record() for s in Step.objects.filter(run_id=r).order_by("seq")]
             for r in (a, b)]
    diff = diff_steps(*steps)
    row = diff.rows[diff.first_divergence]
    return row.left.kind, row.left.seq, row.right.seq


async def control(user, run_id: int, **frame):
    from django.test import AsyncClient

    client = AsyncClient()
    await client.aforce_login(user)
    return await client.post(f"/runs/{run_id}/control", frame, content_type="application/json")


async def paused_run(user) -> Run:
    from tests.waiting import await_until

    async def paused():
        run = await Run.objects.filter(user=user, status="paused").afirst()
        return run

    return await await_until(paused, timeout=10)


async def test_a_tool_breakpoint_holds_the_agent_until_the_person_edits_and_resumes(
        user, token, profile, fake_llm, ended):
    import asyncio

    fake_llm.script(CALL, answer("hail"))
    session = await open_session(token, debug={"break_tools": ["get_weather"]})
    agent = asyncio.ensure_future(weather_agent(
        in_process(token, f"/gateway/s/{session['session']}/v1"), "sunny"))
    run = await paused_run(user)
    state = (await control(user, run.pk, action="edit", seq=2,
                           input={"observation": "hail"})).json()
    assert state["status"] == "paused" and state["detail"]["pending"]["kind"] == "tool"
    assert not agent.done()  # held: the agent's request waits in the gateway
    refused = await control(user, run.pk, action="edit", seq=2, input={"city": "Rome"})
    assert refused.status_code == 409 and "observation" in refused.json()["error"]
    await control(user, run.pk, action="resume")
    said, _ = await asyncio.wait_for(agent, 10)
    assert said == "In Paris it is hail."
    assert fake_llm.requests[-1]["messages"][-1]["content"] == "hail"
    await end_session(token, session["session"])  # its rows are written ahead, by its end
    tool = await step_of(run.pk, "tool")
    assert tool.text == "hail" and tool.meta["edited"] is True


async def step_of(run_id: int, kind: str):
    from traces.models import Step

    return await Step.objects.aget(run_id=run_id, kind=kind)


# --- what real frameworks send (tests/test_gateway_frameworks.py runs the frameworks) ---------

def parts(text: str) -> list[dict]:
    return [{"type": "text", "text": text}]


def smolagents_turn(reply, observation: str) -> list[dict]:
    """A reply and its tool result as smolagents sends them back: the reply's text, then its
    calls written out ("Calling tools:\\n" and a Python literal), the result as a user message
    "Observation:\\n…"; every content as a list of text parts."""
    calls = [{"id": c.id, "type": "function",
              "function": {"name": c.function.name, "arguments": json.loads(c.function.arguments)}}
             for c in reply.tool_calls]
    said = [{"role": "assistant", "content": parts(reply.content)}
            ] if reply.content is not None else []
    return [*said, {"role": "assistant", "content": parts(f"Calling tools:\n{calls}")},
            {"role": "user", "content": parts(f"Observation:\n{observation}")}]


async def smolagents_loop(client, observation: str = "sunny") -> str:
    messages = [{"role": "system", "content": parts("You answer.")},
                {"role": "user", "content": parts(QUESTION)}]
    reply = (await client.chat.completions.create(model="scripted", messages=messages,
                                                  tools=TOOLS)).choices[0].message
    messages += smolagents_turn(reply, observation)
    final = await client.chat.completions.create(model="scripted", messages=messages,
                                                 tools=TOOLS)
    return final.choices[0].message.content


async def test_calls_and_results_written_out_as_smolagents_does_are_one_run_with_its_tool(
        user, token, profile, fake_llm, ended):
    fake_llm.script(CALL, answer("sunny"))
    assert await smolagents_loop(in_process(token)) == "In Paris it is sunny."
    run = await Run.objects.aget(user=user)  # one run, grouped by the conversation
    assert [s[1:3] for s in await sync_to_async(steps_of)(run.pk)] == [
        ("llm", "scripted-model"), ("tool", "get_weather"), ("llm", "scripted-model")]
    tool = await step_of(run.pk, "tool")
    assert tool.input == {"city": "Paris"} and tool.text == "sunny"


async def test_an_observation_written_out_is_edited_where_it_was_written(user, token, profile,
                                                                         fake_llm, ended):
    fake_llm.script(CALL, answer("sunny"))
    session = await open_session(token)
    await smolagents_loop(in_process(token, f"/gateway/s/{session['session']}/v1"))
    source = (await end_session(token, session["session"]))["run"]
    fake_llm.script(answer("hail"))
    session = await open_session(token, mode="fork", source=source, fork_seq=2,
                                 edit={"observation": "hail"})
    said = await smolagents_loop(in_process(token, f"/gateway/s/{session['session']}/v1"))
    assert said == "In Paris it is hail." and len(fake_llm.requests) == 3
    sent = fake_llm.requests[-1]["messages"][-1]
    assert sent["role"] == "user" and sent["content"] == "Observation:\nhail"


def test_a_reply_with_text_and_calls_written_out_in_two_messages_continues_its_run():
    from agentlab.gateway.grouping import prefix_keys, turn_key

    reply = {"role": "assistant", "content": "Let me look.", "tool_calls": [
        {"id": "call_7", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}
    asked = [{"role": "user", "content": QUESTION}]
    sent = [*asked, {"role": "assistant", "content": [{"type": "text", "text": "Let me look."}]},
            {"role": "assistant", "content": "Calling tools:\n[{'id': 'call_7', 'type': "
             "'function', 'function': {'name': 'get_weather', 'arguments': {'city': 'Paris'}}}]"},
            {"role": "user", "content": "Observation:\nsunny"}]
    assert prefix_keys(sent)[0][1] == turn_key(asked, reply)
    # Text that only looks like it is read as text.
    odd = [*asked, {"role": "assistant", "content": "Calling tools:\n__import__('os')"}]
    assert prefix_keys(odd)[0][1] != turn_key(asked, reply)
