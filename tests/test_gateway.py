"""The OpenAI-compatible gateway (/gateway/v1): an agent's calls become one live run.

The agents here are plain openai SDK loops (tests/gateway_clients.py) talking to the ASGI
application, the gateway forwarding to the scripted model server over loopback; the
frameworks' own agents run through it in tests/test_gateway_frameworks.py."""

from __future__ import annotations

import json
import time

import pytest
from asgiref.sync import sync_to_async

from agentlab.gateway.sessions import TABLE
from tests.fake_openai import Reply
from tests.gateway_clients import (
    APP,
    CALL,
    QUESTION,
    TOOLS,
    answer,
    control,
    from_the_tool_result,
    in_process,
    open_session,
    over_http,
    paused_run,
    scripted_profile,
    weather_agent,
    written,
)
from traces.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


def steps_of(run_id: int) -> list[tuple]:
    return [(s.seq, s.kind, s.name, s.status)
            for s in Run.objects.get(pk=run_id).steps.order_by("seq")]


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
    await TABLE.close_quiet(0)  # its end waits for every row
    run = await Run.objects.aget(user=user)
    assert [s[1:3] for s in await sync_to_async(steps_of)(run.pk)] == [
        ("llm", "scripted-model"), ("tool", "get_weather"), ("llm", "scripted-model"),
        ("final", "")]
    assert all(r.get("stream") for r in fake_llm.requests)


def test_a_streamed_reply_reaches_the_agent_as_the_model_writes_it(live_url, user, token,
                                                                   profile, fake_llm):
    """Tokens go on as they come, over real HTTP (agentlab/gateway/answer.py joins only those
    already there into one write): the agent reads the first long before the model has
    written the last."""
    fake_llm.script(Reply(text="Sunny, then rain.", chunk_delay_s=0.3))  # 5 chunks, 1.5 s
    started = time.perf_counter()
    got = []
    stream = over_http(live_url, token).chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": QUESTION}], stream=True)
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            got.append((chunk.choices[0].delta.content, time.perf_counter() - started))
    assert "".join(text for text, _ in got) == "Sunny, then rain."
    assert got[0][1] < got[-1][1] - 0.6, got


def test_a_whole_reply_says_its_length_and_is_not_chunked(live_url, user, token, profile,
                                                         fake_llm):
    """Over real HTTP (daphne): a reply that is not streamed has its Content-Length, as a
    model's own server sends it, so the agent's client reads it without chunk framing."""
    fake_llm.script(Reply(text="Sunny."))
    raw = over_http(live_url, token).chat.completions.with_raw_response.create(
        model="scripted", messages=[{"role": "user", "content": QUESTION}])
    assert raw.parse().choices[0].message.content == "Sunny."
    assert raw.headers["content-length"] == str(len(raw.http_response.content))
    assert "transfer-encoding" not in raw.headers


async def test_two_agents_asking_the_same_question_at_once_stay_two_runs(user, token, profile,
                                                                         fake_llm, ended):
    import asyncio

    fake_llm.responder = from_the_tool_result  # whichever agent asks first
    client = in_process(token)
    said = await asyncio.gather(weather_agent(client, "sunny"), weather_agent(client, "sunny"))
    assert [s for s, _ in said] == ["In Paris it is sunny."] * 2
    await TABLE.close_quiet(0)
    runs = [r async for r in Run.objects.filter(user=user).order_by("pk")]
    assert len(runs) == 2
    for run in runs:
        assert [s[1] for s in await sync_to_async(steps_of)(run.pk)] == ["llm", "tool", "llm",
                                                                         "final"]


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
    await TABLE.close_quiet(0)
    counts = [await Run.objects.filter(pk=r.pk).values_list("pk", flat=True).acount()
              async for r in Run.objects.filter(user=user)]
    runs = [r async for r in Run.objects.filter(user=user).order_by("pk")]
    assert len(runs) == 2 and counts == [1, 1]
    assert [s[1] for s in await sync_to_async(steps_of)(runs[0].pk)] == ["llm", "llm", "final"]
    assert runs[0].agent_snapshot["gateway"]["trace_id"] == trace.split("-")[1]


async def end_session(token: str, key: str, exit_code: int = 0) -> dict:
    import httpx2 as httpx

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=APP),
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
    """The run's step of `kind` once its end is written (the gateway answers the agent
    without waiting for the row)."""
    from tests.waiting import await_until
    from traces.models import Step

    async def ended():
        step = await Step.objects.filter(run_id=run_id, kind=kind).afirst()
        return step if step is not None and step.status != "running" else None

    return await await_until(ended, timeout=10)


async def test_the_upstreams_errors_reach_the_agent_as_the_openai_errors_it_expects(
        user, token, profile, fake_llm, ended):
    import openai

    from tests.fake_openai import Fail

    fake_llm.script(Fail(429, "Slow down.", headers={"Retry-After": "1"}),
                    Fail.context_too_long())
    client = in_process(token)
    with pytest.raises(openai.RateLimitError, match="Slow down"):
        await client.chat.completions.create(model="scripted",
                                             messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.BadRequestError, match="maximum context length"):
        await client.chat.completions.create(model="scripted",
                                             messages=[{"role": "user", "content": "hi again"}])
    await TABLE.close_quiet(0)
    failed = [s async for s in Run.objects.filter(user=user).order_by("pk")]
    assert len(failed) == 2  # nothing continues a failed call: two one-call runs
    step = await step_of(failed[0].pk, "llm")
    assert step.status == "error" and "Slow down" in step.text


async def test_what_the_gateway_cannot_do_is_said_by_name(user, token, profile, fake_llm):
    import openai

    client = in_process(token)
    with pytest.raises(openai.BadRequestError, match="chat completions") as refused:
        await client.responses.create(model="scripted", input="hi")
    assert "set_default_openai_api" in str(refused.value)
    with pytest.raises(openai.BadRequestError, match="Unknown parameter: wibble"):
        await client.chat.completions.create(model="scripted", extra_body={"wibble": 1},
                                             messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.BadRequestError, match="one choice"):
        await client.chat.completions.create(model="scripted", n=2,
                                             messages=[{"role": "user", "content": "hi"}])
    assert fake_llm.requests == []
    names = [m.id async for m in client.models.list()]
    assert "scripted" in names


async def test_a_person_can_answer_a_held_call_for_the_model(user, token, profile, fake_llm,
                                                              ended):
    import asyncio

    session = await open_session(token, debug={"break_kinds": ["llm"]})
    client = in_process(token, f"/gateway/s/{session['session']}/v1")
    asked = asyncio.ensure_future(client.chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": "Who are you?"}]))
    run = await paused_run(user)
    state = (await control(user, run.pk, action="edit", seq=1,
                           input={"response": {"text": "A person, this time."}})).json()
    assert state["detail"]["edited"] is True and "expires_at" in state["detail"]
    await control(user, run.pk, action="resume")
    reply = await asyncio.wait_for(asked, 10)
    assert reply.choices[0].message.content == "A person, this time."
    assert fake_llm.requests == []  # the model was never asked
    step = await step_of(run.pk, "llm")
    assert step.meta["answered_by"] == "person" and step.text == "A person, this time."


async def test_cancel_answers_the_held_agent_with_an_error_it_surfaces(user, token, profile,
                                                                       fake_llm, ended):
    import asyncio

    import openai

    session = await open_session(token, debug={"step_mode": True})
    client = in_process(token, f"/gateway/s/{session['session']}/v1")
    asked = asyncio.ensure_future(client.chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": "Anything?"}]))
    run = await paused_run(user)
    await control(user, run.pk, action="cancel")
    with pytest.raises(openai.APIStatusError, match="cancelled in Agent Lab"):
        await asyncio.wait_for(asked, 10)
    from tests.waiting import await_until

    async def cancelled():
        return (await Run.objects.aget(pk=run.pk)).status == "cancelled"

    await await_until(cancelled, timeout=10)


async def test_a_call_held_past_the_clients_patience_is_answered_with_a_timeout(
        user, token, profile, fake_llm, ended, settings):
    import openai

    settings.AGENTLAB_GATEWAY_HOLD_S = 1
    session = await open_session(token, debug={"step_mode": True})
    client = in_process(token, f"/gateway/s/{session['session']}/v1")
    with pytest.raises(openai.APIStatusError, match="held at a breakpoint") as answered:
        await client.chat.completions.create(
            model="scripted", messages=[{"role": "user", "content": "Still there?"}])
    assert answered.value.status_code == 504
    assert answered.value.response.headers["x-should-retry"] == "false"
    assert fake_llm.requests == []
    run = await Run.objects.aget(user=user)
    step = await step_of(run.pk, "llm")
    assert step.status == "error" and "held at a breakpoint" in step.text


async def test_embeddings_pass_through_to_the_profile_and_are_not_recorded(user, token, profile,
                                                                           fake_llm):
    vectors = await in_process(token).embeddings.create(model="scripted", input=["ab", "abcd"])
    assert [v.embedding[0] for v in vectors.data] == [2.0, 4.0]
    assert fake_llm.requests[-1]["model"] == "scripted-model"  # the profile's own name
    assert not await Run.objects.filter(user=user).aexists()


async def test_a_sessions_run_keeps_the_trace_id_its_agent_propagates(user, token, profile,
                                                                      fake_llm, ended):
    fake_llm.script(answer("sunny"))
    session = await open_session(token, name="traced.py")
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    await in_process(token, f"/gateway/s/{session['session']}/v1").chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": "hi"}],
        extra_headers={"traceparent": f"00-{trace}-00f067aa0ba902b7-01"})
    run = await Run.objects.aget(user=user)
    assert run.agent_snapshot["gateway"]["trace_id"] == trace
    assert run.agent_snapshot["gateway"]["grouped_by"] == "session"


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
    await written()
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


async def test_a_route_changed_through_another_process_is_followed_within_seconds(
        user, token, fake_llm, monkeypatch, ended):
    import asyncio

    from agentlab.gateway import routes
    from agentlab.gateway.models import GatewayRoute
    from agentlab.models import ModelProfile

    first = await sync_to_async(scripted_profile)(fake_llm)
    other = await ModelProfile.objects.acreate(name="other", base_url=fake_llm.base_url,
                                               model="other-model", retries=0, timeout_s=5)
    row = await GatewayRoute.objects.acreate(model_name="gpt-x", profile=first)
    fake_llm.script(answer("a"), answer("b"))
    client = in_process(token)
    ask = [{"role": "user", "content": "hi"}]
    await client.chat.completions.create(model="gpt-x", messages=ask)
    assert fake_llm.last_request["model"] == "scripted-model"
    # As another web process would change it: no signal reaches this one.
    await GatewayRoute.objects.filter(pk=row.pk).aupdate(profile=other)
    monkeypatch.setattr(routes, "FRESH_S", 0.2)
    await asyncio.sleep(0.3)
    await client.chat.completions.create(model="gpt-x", messages=[*ask, {"role": "user",
                                                                         "content": "again"}])
    assert fake_llm.last_request["model"] == "other-model"
