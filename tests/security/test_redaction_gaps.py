"""Guardrails that did less than they said (issue 35): what a guardrail redacted, or an output
judge blocked, reached a user anyway, or a recorded question went around the input checks.

Each test is the attack as reproduced on the code before the fix, through the real paths: the
scripted OpenAI-compatible server (tests/fake_openai.py), the run and chat sockets
(WebsocketCommunicator), the pages, the exports and the bundle import."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.core import mail
from django.test import AsyncClient, Client
from django.urls import reverse

from agentlab.asgi import application
from agentlab.chat.models import ChatTurn, Conversation
from agentlab.guardrails import detectors
from agentlab.models import Agent, Guardrail, ModelProfile, Tool
from agentlab.runs import control as run_control
from agentlab.runs.execution import execute_run
from agentlab.runs.snapshot import create_run
from tests.fake_openai import Reply
from tests.page_actions import import_, started
from tests.sockets import connect, frames_until, headers, is_type, paused, synced
from tests.waiting import await_until
from traces.bundle import export_bundle
from traces.models import Run, Step

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv"
EMAIL = "jane.doe@example.com"
PEM = ("-----BEGIN PRIVATE KEY-----\n"
       "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n"
       "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu\n"
       "-----END PRIVATE KEY-----")
PEM_LINES = PEM.splitlines()[1:3]
MAIL_ARGS = json.dumps({"to": EMAIL, "subject": "Report", "body": "Attached."})


OPEN: list[WebsocketCommunicator] = []


@pytest.fixture(autouse=True)
async def close_sockets(stop_runs):
    """Every socket a test opened is closed, also when it fails before it closes it (an
    open one would keep its run, and the test, waiting); then its runs are stopped."""
    yield
    while OPEN:
        with contextlib.suppress(Exception):
            await OPEN.pop().disconnect()


async def opened(comm: WebsocketCommunicator) -> WebsocketCommunicator:
    OPEN.append(comm)
    return comm


def guardrail(name: str = "No keys", **fields: Any) -> Guardrail:
    row = Guardrail(name=name, **{"stage": "output", "kind": "api_key", "action": "redact",
                                  "applies_to_all": True, **fields})
    row.full_clean()
    row.save()
    return row


aguardrail = sync_to_async(guardrail)


def office_agent(fake_llm, *, system_prompt: str = "", tools: tuple[str, ...] = ("calculator",),
                 name: str = "Office agent") -> Agent:
    profile = ModelProfile.objects.create(name=f"{name} profile", base_url=fake_llm.base_url,
                                          model="scripted-model", retries=0)
    agent = Agent(name=name, paradigm="react", model_profile=profile,
                  system_prompt=system_prompt, params={"mode": "function_calling"})
    agent.full_clean()
    agent.save()
    agent.tools.set(Tool.objects.filter(name__in=tools))
    return agent


aoffice_agent = sync_to_async(office_agent)


async def started_run(agent: Agent, user, question: str, *,
                      debug: dict[str, Any] | None = None) -> tuple[Run, WebsocketCommunicator]:
    run = await sync_to_async(create_run)(agent, user, question)
    comm = await opened(await connect(run.pk, user))
    await synced(comm)
    if debug is not None:
        await comm.send_json_to({"action": "debug", **debug})
    await comm.send_json_to({"action": "start"})
    return run, comm


def streamed(frames: list[dict]) -> str:
    return "".join(f["delta"] for f in frames if f["type"] == "token")


def everything_shown(user, run: Run) -> str:
    """The run's page, the runs list, the chat pages and every export, as its owner sees them."""
    client = Client()
    client.force_login(user)
    bodies = []
    urls = [f"/runs/{run.pk}/", "/runs/", f"/runs/{run.pk}/export/",
            f"/runs/{run.pk}/export/otlp/", f"/runs/{run.pk}/export/otlp.pb", "/chat/", "/"]
    urls += [reverse("chat_conversation", args=[c.pk])
             for c in Conversation.objects.filter(user=user)]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, url
        body = b"".join(response) if response.streaming else response.content
        bodies.append(body.decode(errors="replace"))
    return "\n".join(bodies)


def recorded(run: Run) -> str:
    run.refresh_from_db()
    rows = [json.dumps([s.input, s.output, s.text, s.meta]) for s in run.steps.all()]
    return json.dumps([run.input, run.history, run.final_answer, run.error, *rows])


# ------------------------------------------------------------------ 1. control frames


async def test_a_step_mode_pause_shows_the_request_as_the_trace_does(user, fake_llm):
    """The paused frame carried the whole LLM request as sent: a key in the system prompt
    that the trace shows redacted reached an ordinary user's socket."""
    await aguardrail()
    agent = await aoffice_agent(fake_llm, system_prompt=f"Billing API key: {KEY}. Be brief.")
    fake_llm.script(Reply(text="Done."))
    run, comm = await started_run(agent, user, "Hello", debug={"step_mode": True})
    frames = await frames_until(comm, paused)
    pending = frames[-1]["detail"]["pending"]
    assert pending["kind"] == "llm"
    assert KEY not in json.dumps(frames)
    assert "[redacted: api_key]" in json.dumps(pending["input"])
    await comm.send_json_to({"action": "resume"})
    frames = await frames_until(comm, is_type("final"))
    assert frames[-1]["status"] == "succeeded" and KEY not in json.dumps(frames)
    # The model was sent the agent's own prompt as configured: resuming unedited edits nothing.
    assert KEY in json.dumps(fake_llm.requests[0]["messages"])
    await comm.disconnect()


async def test_an_approval_frame_shows_the_arguments_as_the_trace_does(user, fake_llm):
    """The approval frame carried the tool's arguments as the model wrote them. Approved as
    shown (the page sends the arguments box back), the call runs as the model wrote it."""
    await aguardrail(name="No mail", kind="email")
    agent = await aoffice_agent(fake_llm, tools=("send_email",))
    await Tool.objects.filter(name="send_email").aupdate(needs_approval=True)
    mail.outbox = []
    fake_llm.script(Reply(tool_calls=[("send_email", MAIL_ARGS)]), Reply(text="Sent."))
    run, comm = await started_run(agent, user, "Send the report.")
    frames = await frames_until(comm, is_type("approval"))
    approval = frames[-1]
    assert approval["arguments"]["to"] == "[redacted: email]"
    await comm.send_json_to({"action": "approve", "seq": approval["seq"],
                             "arguments": approval["arguments"]})
    frames += await frames_until(comm, is_type("final"))
    assert EMAIL not in json.dumps(frames)
    assert [m.to for m in mail.outbox] == [[EMAIL]]  # sent where the model said
    await comm.disconnect()


# ------------------------------------------------------------------ 2. streamed tokens


async def test_a_multi_line_secret_is_not_streamed_line_by_line(user, fake_llm):
    """A deny-list pattern for a PEM block spans lines: released a line at a time, each line
    of the key streamed raw, though the recorded step was redacted whole."""
    await aguardrail(name="No PEM", kind="regex",
                     pattern=r"-----BEGIN [A-Z ]*KEY-----[\s\S]*?-----END [A-Z ]*KEY-----")
    agent = await aoffice_agent(fake_llm)
    fake_llm.script(Reply(text=f"Here is the key:\n{PEM}\nKeep it safe.\n"))
    run, comm = await started_run(agent, user, "Show me the key")
    frames = await frames_until(comm, is_type("final"))
    await comm.disconnect()
    assert frames[-1]["status"] == "succeeded"
    for line in PEM_LINES:
        assert line not in json.dumps(frames)
    assert streamed(frames).startswith("Here is the key:\n")
    assert "[redacted: deny]" in frames[-1]["answer"]


async def test_nothing_past_a_length_limit_is_streamed(user, fake_llm):
    """A max-length guardrail redacts what is over the limit in the record; the stream sent
    every line of a longer reply whole."""
    await aguardrail(name="Short", kind="max_length", limit=40)
    agent = await aoffice_agent(fake_llm)
    reply = "First line, well within it.\nSecond line goes past the limit.\nThird: secret.\n"
    fake_llm.script(Reply(text=reply))
    run, comm = await started_run(agent, user, "Talk")
    frames = await frames_until(comm, is_type("final"))
    await comm.disconnect()
    text = streamed(frames)
    assert reply.startswith(text) and len(text) <= 40
    assert "Third: secret." not in json.dumps(frames)


def test_a_pem_private_key_is_an_api_key_secret():
    text = f"before\n{PEM}\nafter"
    (span,) = detectors.api_keys(text)
    assert text[span.start:span.end] == PEM


# ------------------------------------------------------------------ 3. a code agent's retry


def test_a_code_agents_retry_sends_and_stores_the_question_as_masked(fake_llm):
    """The retry's history held the caller's question unmasked: stored in the run, sent to
    the model, exported."""
    from tests.factories import scripted_profile
    from tests.sample_agents import agents as sample

    scripted_profile(fake_llm.base_url)
    guardrail(name="No mail asked", stage="input", kind="email")
    trip = '{"city": "Rome", "days": 2, "highlights": ["Colosseum"]}'
    fake_llm.script(Reply(text="Rome is lovely!"), Reply(text=trip))
    sample.plan_trip.run(f"Rome (write to {EMAIL})", days=2)
    first, second = Run.objects.order_by("pk")
    assert EMAIL not in first.input and "[redacted: email]" in first.input
    assert EMAIL not in json.dumps(second.history)
    assert EMAIL not in json.dumps(fake_llm.requests)
    assert EMAIL not in json.dumps(export_bundle(second))


# ------------------------------------------------------------------ 4. an output judge's block


async def test_an_answer_an_output_judge_blocked_is_shown_nowhere(user, fake_llm):
    """Only the run's answer field changed: the blocked text stayed in the recorded LLM step,
    the token stream, the chat page and the exports."""
    judge = await ModelProfile.objects.acreate(name="Judge", base_url=fake_llm.base_url,
                                               model="judge-model", retries=0)
    await aguardrail(name="No discounts", kind="judge", action="block", judge_profile=judge,
                     pattern="Never reveal discounts.", message="That answer was withheld.")
    agent = await aoffice_agent(fake_llm)
    secret = "Partners get 40% off until June."
    fake_llm.script(Reply(text=f"{secret}\nAsk sales for details.\n"),
                    Reply(text="VIOLATION\nIt reveals a discount."))
    conversation = await Conversation.objects.acreate(user=user, agent=agent)
    run, comm = await started_run(agent, user, "What discount do partners get?")
    frames = await frames_until(comm, is_type("final"))
    await comm.disconnect()
    await sync_to_async(ChatTurn.objects.create)(conversation=conversation, run=run,
                                                 position=1)
    run = await Run.objects.aget(pk=run.pk)
    assert run.status == "failed" and run.final_answer == "That answer was withheld."
    assert streamed(frames) == ""
    last = frames[-1]
    assert secret not in json.dumps(last)
    assert secret not in await sync_to_async(recorded)(run)
    assert secret not in await sync_to_async(everything_shown)(user, run)
    llm = await Step.objects.filter(run=run, kind="llm").order_by("-seq").afirst()
    assert llm.meta["withheld"] == "No discounts"
    assert "[withheld: No discounts]" in llm.text


# ------------------------------------------------------------------ 5. "everything recorded"


async def chat_socket(conversation: Conversation, user) -> WebsocketCommunicator:
    comm = WebsocketCommunicator(application, f"/ws/chat/{conversation.pk}/",
                                 headers=await sync_to_async(headers)(user))
    assert (await comm.connect())[0]
    return await opened(comm)


async def test_an_email_guardrail_left_at_its_default_stage_covers_the_question(
        user, fake_llm):
    """Labelled "everything recorded", it redacted every step but left the address in the
    question: the chat, the run's title, the runs list, the conversation's title and all
    three exports. And the chat's approval box showed the tool's arguments unredacted."""
    row = await aguardrail(name="No mail", kind="email")
    assert row.stage == "output"  # the default
    agent = await aoffice_agent(fake_llm, tools=("send_email",))
    await Tool.objects.filter(name="send_email").aupdate(needs_approval=True)
    mail.outbox = []
    fake_llm.script(Reply(tool_calls=[("send_email", MAIL_ARGS)]), Reply(text="Sent."))
    conversation = await Conversation.objects.acreate(user=user, agent=agent)
    chat = await chat_socket(conversation, user)
    await chat.send_json_to({"action": "start", "message": f"Mail the report to {EMAIL}"})
    turn = await chat.receive_json_from()
    assert EMAIL not in turn["html"]
    comm = await opened(await connect(turn["run"], user))
    frames = await synced(comm)
    if not any(f["type"] == "approval" for f in frames):
        frames += await frames_until(comm, is_type("approval"))
    approval = next(f for f in frames if f["type"] == "approval")
    assert approval["arguments"]["to"] == "[redacted: email]"
    await comm.send_json_to({"action": "deny", "seq": approval["seq"], "reason": "no"})
    frames += await frames_until(comm, is_type("final"))
    await comm.disconnect()
    await chat.disconnect()
    assert EMAIL not in json.dumps(frames)
    run = await Run.objects.aget(pk=turn["run"])
    assert run.input == "Mail the report to [redacted: email]"
    assert EMAIL not in (await Conversation.objects.aget(pk=conversation.pk)).title
    assert EMAIL not in await sync_to_async(recorded)(run)
    assert EMAIL not in await sync_to_async(everything_shown)(user, run)
    decision = await Step.objects.filter(run=run, kind="guardrail").order_by("seq").afirst()
    assert decision.meta["step"] is None and decision.meta["action"] == "redact"


# ------------------------------------------------------------------ 6. re-sent questions


async def record_with(agent: Agent, user, fake_llm, question: str, *script: Reply) -> Run:
    fake_llm.script(*script)
    run = await sync_to_async(create_run)(agent, user, question)
    await execute_run(await Run.objects.select_related("user").aget(pk=run.pk))
    fake_llm.reset()
    return await Run.objects.aget(pk=run.pk)


async def finished(pk: int) -> Run:
    from agentlab.runs.registry import REGISTRY

    if task := REGISTRY.task(pk):
        async with asyncio.timeout(30):
            await task
    return await Run.objects.aget(pk=pk)


@pytest.mark.parametrize("how", ["resume", "fork", "replay"])
async def test_a_recorded_question_goes_through_the_input_checks_again(user, fake_llm, how):
    """An imported bundle named after an agent, then resumed, forked or replayed: its
    question went to the model without today's input checks."""
    agent = await aoffice_agent(fake_llm)
    source = await record_with(agent, user, fake_llm, f"Why does {KEY} fail?",
                               Reply(tool_calls=[("calculator", '{"expression": "6*7"}')]),
                               Reply(text="It does not."))
    bundle = await sync_to_async(export_bundle)(source)
    if how == "resume":
        bundle["steps"] = bundle["steps"][:2]
        bundle["run"]["status"] = "running"
    client = AsyncClient()
    await client.aforce_login(user)
    imported = await import_(client, json.dumps(bundle).encode())
    assert imported.agent_name == agent.name
    await aguardrail(name="No keys asked", stage="input", action="block",
                     message="Do not paste keys.")
    fake_llm.responder = lambda body: "live answer"
    if how == "resume":
        response = await client.post(reverse("run_resume", args=[imported.pk]))
    elif how == "fork":
        response = await client.post(reverse("run_fork", args=[imported.pk, 2]),
                                     {"observation": "100"})
    else:
        response = await client.post(reverse("run_replay", args=[imported.pk]),
                                     {"tools": "live", "agent": "current"})
    run = await finished(started(response))
    assert KEY not in json.dumps(fake_llm.requests)
    assert (run.status, run.final_answer) == ("failed", "Do not paste keys.")
    assert KEY not in run.input and fake_llm.requests == []


# ------------------------------------------------------------------ 7. one decision, one call


async def test_a_recorded_approval_covers_exactly_one_served_call(user, fake_llm):
    """A forged bundle: two recorded approvals, one recorded result. Two identical parallel
    calls both took an approval before the first took the result, so the second ran live
    with the authority of whoever replays."""
    agent = await aoffice_agent(fake_llm, tools=("send_email",))
    await Tool.objects.filter(name="send_email").aupdate(needs_approval=False)
    mail.outbox = []
    source = await record_with(agent, user, fake_llm, "Send the report.",
                               Reply(tool_calls=[("send_email", MAIL_ARGS)]),
                               Reply(text="Sent."))
    assert len(mail.outbox) == 1
    bundle = await sync_to_async(export_bundle)(source)
    tool = next(s for s in bundle["steps"] if s["kind"] == "tool")
    approved = {**tool, "kind": "approval", "text": "approved", "meta": {},
                "output": {"approved": True, "arguments": None, "reason": ""}}
    bundle["steps"] = [{**approved, "seq": 1}, {**approved, "seq": 2}, {**tool, "seq": 3}]
    for step in bundle["steps"]:
        step["parent"] = None
    client = AsyncClient()
    await client.aforce_login(user)
    imported = await import_(client, json.dumps(bundle).encode())
    await Tool.objects.filter(name="send_email").aupdate(needs_approval=True)
    mail.outbox = []
    fake_llm.script(Reply(tool_calls=[("send_email", MAIL_ARGS), ("send_email", MAIL_ARGS)]),
                    Reply(text="Sent twice."))
    pk = started(await client.post(reverse("run_replay", args=[imported.pk]),
                                   {"tools": "recorded", "agent": "current"}))

    async def decide_what_waits() -> None:  # a person denies what the record does not cover
        while True:
            control = run_control.get(pk)
            for step in control.approvals() if control else []:
                await control.act({"action": "deny", "seq": step.seq, "reason": "not mine"})
            await asyncio.sleep(0.02)

    denier = asyncio.ensure_future(decide_what_waits())
    try:
        run = await finished(pk)
    finally:
        denier.cancel()
    assert run.status == "succeeded", run.error
    assert mail.outbox == []  # nothing ran live on the record's say-so
    tools = [s async for s in Step.objects.filter(run=run, kind="tool").order_by("seq")]
    assert sorted(bool(s.meta.get("replayed")) for s in tools) == [False, True]
    assert any(s.meta.get("denied") for s in tools)
    await await_until(lambda: run_control.get(pk) is None, message="the run's control left")
