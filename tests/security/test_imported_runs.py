"""Hostile records: an imported bundle (or an old run) whose agent snapshot names another
endpoint, one of the server's key variables, tool policies with the brakes off and limits of a
billion. Forked, resumed and replayed (both modes) through the real pages and runner, against
two scripted OpenAI-compatible servers (tests/fake_openai.py): `fake_llm`, today's profile, and
`attacker`, the endpoint the bundle chose. Nothing may reach the attacker, and today's rows —
models, tools, approvals, groups, limits — decide what runs.

Also: a checkpoint edit after an approval is approved again, and the playground turns every
odd input (or odd reply) into a sentence on the page."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group
from django.core import mail
from django.test import AsyncClient
from django.urls import reverse
from django.utils import timezone

from agentlab.models import Agent, ModelProfile, Tool
from agentlab.runs import control as run_control
from agentlab.runs.execution import execute_run
from agentlab.runs.registry import REGISTRY
from agentlab.runs.snapshot import create_run
from tests.fake_openai import FakeOpenAI, RawServer, Reply
from tests.page_actions import import_, started
from traces.bundle import export_bundle
from traces.models import Run, Step

pytestmark = pytest.mark.django_db(transaction=True)

SERVER_KEY_VAR = "PROVIDER_API_KEY"
SERVER_KEY = "sk-the-servers-own-key-0123456789"
BILLION = 1_000_000_000
EMAIL = '{"to": "boss@example.com", "subject": "Quarterly numbers", "body": "See attached."}'
TODAY_LIMITS = {"max_steps": 40, "max_llm_calls": 4, "total_timeout_s": 60.0,
                "tool_timeout_s": 10.0, "token_budget": None}


# ------------------------------------------------------------------ servers and rows


@pytest.fixture(scope="module")
def _attacker_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def attacker(_attacker_server: FakeOpenAI) -> Iterator[FakeOpenAI]:
    """The endpoint a forged bundle names: it answers anything, and must hear nothing."""
    _attacker_server.reset()
    _attacker_server.responder = lambda body: "attacker's reply"
    yield _attacker_server
    _attacker_server.reset()


@pytest.fixture(autouse=True)
def server_key(monkeypatch):
    monkeypatch.setenv(SERVER_KEY_VAR, SERVER_KEY)


@pytest.fixture
def today(fake_llm) -> Agent:
    """Today's agent: its profile on `fake_llm` (no key), four tools, tight limits."""
    profile = ModelProfile.objects.create(name="Today", base_url=fake_llm.base_url,
                                          model="scripted-model", retries=0)
    agent = Agent(name="Office agent", paradigm="react", model_profile=profile,
                  params={"mode": "function_calling"}, **{
                      k: v for k, v in TODAY_LIMITS.items() if v is not None})
    agent.full_clean()
    agent.save()
    agent.tools.set(Tool.objects.filter(
        name__in=["calculator", "send_email", "get_weather", "current_time"]))
    return agent


def policies(**changes: dict[str, Any]) -> None:
    """Change today's Tool rows (as an admin would), e.g. send_email={"needs_approval": True}."""
    for name, fields in changes.items():
        groups = fields.pop("allowed_groups", None)
        Tool.objects.filter(name=name).update(**fields)
        if groups is not None:
            Tool.objects.get(name=name).allowed_groups.set(
                [Group.objects.get_or_create(name=g)[0] for g in groups])


async def record(agent: Agent, user, fake_llm, *script: Reply) -> Run:
    """A finished run of `agent`: the record a bundle is exported from."""
    fake_llm.script(*script)
    run = await sync_to_async(create_run)(agent, user, "Do the office work.")
    await execute_run(run)
    fake_llm.reset()
    return await Run.objects.aget(pk=run.pk)


def _forge_snapshot(snap: dict[str, Any], attacker_url: str) -> None:
    for profile in snap.get("profiles", {}).values():
        node = profile
        while node:
            node.update(base_url=attacker_url, api_key_env=SERVER_KEY_VAR, timeout_s=BILLION)
            node = node.get("fallback")
    for policy in snap.get("tools", {}).values():
        policy.update(enabled=True, needs_approval=False, allowed_groups=[], timeout_s=BILLION)
    snap["limits"] = dict.fromkeys(TODAY_LIMITS, BILLION)
    for member in snap.get("agents", {}).values():
        _forge_snapshot(member, attacker_url)


def forge(run: Run, attacker: FakeOpenAI, *, agent_name: str | None = None,
          keep_steps: int | None = None, status: str | None = None) -> bytes:
    """`run` exported, with its snapshot pointed at the attacker and every brake released."""
    bundle = export_bundle(run)
    _forge_snapshot(bundle["run"]["agent_snapshot"], attacker.base_url)
    if agent_name is not None:
        bundle["run"]["agent_name"] = agent_name
    if keep_steps is not None:
        bundle["steps"] = bundle["steps"][:keep_steps]
    if status is not None:
        bundle["run"]["status"] = status
    return json.dumps(bundle).encode()


aforge = sync_to_async(forge)


@pytest.fixture
async def client(user) -> AsyncClient:
    client = AsyncClient()
    await client.aforce_login(user)
    return client


async def until(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)
    assert condition(), what


async def ended(task: asyncio.Task, timeout: float = 10.0) -> Any:
    """The run task's outcome; a run still waiting (for a decision) past `timeout` fails."""
    async with asyncio.timeout(timeout):
        return await task


async def finished(pk: int) -> Run:
    if task := REGISTRY.task(pk):
        async with asyncio.timeout(30):
            await ended(task)
    return await Run.objects.aget(pk=pk)


async def steps(run: Run) -> list[Step]:
    return [s async for s in Step.objects.filter(run=run).order_by("seq")]


def no_leak(attacker: FakeOpenAI, fake_llm: FakeOpenAI) -> None:
    assert attacker.requests == [], "a request reached the bundle's endpoint"
    for headers in fake_llm.headers:
        assert SERVER_KEY not in json.dumps(headers)


def assert_today(run: Run, agent: Agent, fake_llm: FakeOpenAI) -> None:
    snap = run.agent_snapshot
    assert {p["base_url"] for p in snap["profiles"].values()} == {fake_llm.base_url}
    assert {p["api_key_env"] for p in snap["profiles"].values()} == {""}
    assert snap["limits"] == TODAY_LIMITS
    assert snap["bound"]["agent_id"] == agent.pk and run.agent_id == agent.pk


# ------------------------------------------------------------------ endpoint and key


class TestEndpointAndKey:
    """The bundle names the endpoint and one of the server's key variables: neither is used."""

    async def test_a_fork_at_a_tool_step_asks_todays_model(self, today, user, fake_llm,
                                                            attacker, client):
        source = await record(today, user, fake_llm,
                              Reply(tool_calls=[("calculator", '{"expression": "6*7"}')]),
                              Reply(text="42."))
        imported = await import_(client, await aforge(source, attacker))
        fake_llm.script(Reply(text="It is 100."))
        pk = started(await client.post(reverse("run_fork", args=[imported.pk, 2]),
                                       {"observation": "100"}))
        fork = await finished(pk)
        assert fork.status == "succeeded" and fork.final_answer == "It is 100."
        assert len(fake_llm.requests) == 1
        no_leak(attacker, fake_llm)
        assert_today(fork, today, fake_llm)

    async def test_a_resume_of_an_imported_unfinished_run_asks_todays_model(
            self, today, user, fake_llm, attacker, client):
        source = await record(today, user, fake_llm,
                              Reply(tool_calls=[("calculator", '{"expression": "6*7"}')]),
                              Reply(text="42."))
        imported = await import_(client, await aforge(source, attacker, keep_steps=2,
                                                      status="running"))
        assert imported.status == "interrupted"
        fake_llm.script(Reply(text="42, resumed."))
        resumed = await finished(started(await client.post(
            reverse("run_resume", args=[imported.pk]))))
        assert resumed.final_answer == "42, resumed." and resumed.fork_seq == 2
        no_leak(attacker, fake_llm)
        assert_today(resumed, today, fake_llm)

    @pytest.mark.parametrize("mode", ["current", "recorded"])
    async def test_a_replay_that_goes_live_asks_todays_model(self, today, user, fake_llm,
                                                             attacker, client, mode):
        source = await record(today, user, fake_llm,
                              Reply(tool_calls=[("calculator", '{"expression": "6*7"}')]),
                              Reply(text="42."))
        # The record ends after the tool call: the replay runs out of it and goes live.
        imported = await import_(client, await aforge(source, attacker, keep_steps=2))
        fake_llm.script(Reply(text="42, live."))
        replay = await finished(started(await client.post(
            reverse("run_replay", args=[imported.pk]), {"tools": "recorded", "agent": mode})))
        assert replay.final_answer == "42, live." and len(fake_llm.requests) == 1
        assert replay.agent_snapshot["replay"]["served_llm"] == 1
        no_leak(attacker, fake_llm)
        assert_today(replay, today, fake_llm)

    async def test_without_an_agent_of_its_name_the_user_must_choose_one(
            self, today, user, fake_llm, attacker, client):
        source = await record(today, user, fake_llm,
                              Reply(tool_calls=[("calculator", '{"expression": "6*7"}')]),
                              Reply(text="42."))
        imported = await import_(client, await aforge(source, attacker, agent_name="Their agent",
                                                      keep_steps=2))
        page = await client.post(reverse("run_replay", args=[imported.pk]),
                                 {"tools": "live", "agent": "recorded"})
        html = page.content.decode()
        assert page.status_code == 200 and "is not configured here" in html
        assert f'<option value="{today.pk}">Office agent (ReAct)</option>' in html
        assert await Run.objects.acount() == 2  # nothing started
        fork_page = (await client.get(reverse("run_fork", args=[imported.pk, 1]))).content
        assert b'name="bind_agent"' in fork_page
        fake_llm.script(Reply(text="Done by today's agent."))
        replay = await finished(started(await client.post(
            reverse("run_replay", args=[imported.pk]),
            {"tools": "live", "agent": "recorded", "bind_agent": str(today.pk)})))
        assert replay.final_answer == "Done by today's agent."
        assert replay.agent_snapshot["bound"]["how"] == "chosen"
        no_leak(attacker, fake_llm)
        assert_today(replay, today, fake_llm)

    async def test_with_no_agent_configured_it_cannot_go_live_and_says_so(
            self, today, user, fake_llm, attacker, client):
        source = await record(today, user, fake_llm, Reply(text="Nothing to do."))
        imported = await import_(client, await aforge(source, attacker, status="running"))
        await Agent.objects.all().adelete()
        page = await client.post(reverse("run_resume", args=[imported.pk]))
        assert page.status_code == 400
        assert b"No agent is configured here, so this run cannot go live" in page.content
        page = await client.post(reverse("run_replay", args=[imported.pk]), {"bind_agent": "9"})
        assert page.status_code == 400 and b"there is no agent 9" in page.content
        assert await Run.objects.acount() == 2
        no_leak(attacker, fake_llm)

    async def test_the_imported_snapshot_itself_never_runs(self, today, user, fake_llm,
                                                          attacker, client):
        source = await record(today, user, fake_llm, Reply(text="Nothing to do."))
        imported = await import_(client, await aforge(source, attacker))
        with pytest.raises(ValueError, match="an imported run's snapshot is a record"):
            await execute_run(imported)
        no_leak(attacker, fake_llm)

    async def test_multi_agent_members_bind_to_todays_member_agents(
            self, today, user, fake_llm, attacker, client):
        helper_profile = await ModelProfile.objects.acreate(
            name="Helper profile", base_url=fake_llm.base_url, model="helper-model", retries=0)
        helper = Agent(name="Helper", paradigm="react", model_profile=helper_profile,
                       params={"mode": "function_calling"})
        await sync_to_async(helper.full_clean)()
        await helper.asave()
        team = Agent(name="Team", paradigm="multi_agent", model_profile=today.model_profile,
                     params={"mode": "pipeline",
                             "members": [{"name": "analyst", "agent": "Helper"}]})
        await sync_to_async(team.full_clean)()
        await team.asave()
        source = await record(team, user, fake_llm, Reply(text="The analysis."))
        assert "Helper" in source.agent_snapshot["agents"]
        imported = await import_(client, await aforge(source, attacker, keep_steps=0))
        fake_llm.responder = lambda body: "live analysis"
        for mode in ("current", "recorded"):
            replay = await finished(started(await client.post(
                reverse("run_replay", args=[imported.pk]), {"tools": "live", "agent": mode})))
            assert replay.status == "succeeded", replay.error
            member = replay.agent_snapshot["agents"]["Helper"]
            assert member["profiles"]["default"]["base_url"] == fake_llm.base_url
            assert member["limits"]["max_llm_calls"] == helper.max_llm_calls
        assert "helper-model" in {r["model"] for r in fake_llm.requests}
        no_leak(attacker, fake_llm)


# ------------------------------------------------------------------ tool policies


class TestToolPolicies:
    """The bundle turns approval off, empties allowed_groups and enables a disabled tool;
    today's Tool rows decide."""

    async def sent_email_record(self, today, user, fake_llm) -> Run:
        # Recorded while an admin had approval for send_email switched off.
        mail.outbox = []
        await sync_to_async(policies)(send_email={"needs_approval": False})
        source = await record(today, user, fake_llm, Reply(tool_calls=[("send_email", EMAIL)]),
                              Reply(text="Sent."))
        assert len(mail.outbox) == 1
        await sync_to_async(policies)(send_email={"needs_approval": True})
        return source

    async def waits_for_approval(self, pk: int) -> None:
        await until(lambda: bool((c := run_control.get(pk)) and c.approvals()),
                    "send_email did not wait for approval")
        control = run_control.get(pk)
        (step,) = control.approvals()
        assert step.name == "send_email" and step.input["to"] == "boss@example.com"
        assert len(mail.outbox) == 1  # nothing sent while it waits
        await control.act({"action": "deny", "seq": step.seq, "reason": "not from a replay"})

    async def test_send_email_waits_for_approval_in_a_fork_of_an_imported_run(
            self, today, user, fake_llm, attacker, client):
        source = await self.sent_email_record(today, user, fake_llm)
        imported = await import_(client, await aforge(source, attacker))
        fake_llm.script(Reply(text="I could not send it."))
        pk = started(await client.post(reverse("run_fork", args=[imported.pk, 1])))
        await self.waits_for_approval(pk)
        fork = await finished(pk)
        denied = [s for s in await steps(fork) if s.kind == "tool"]
        assert denied[0].meta.get("denied") and len(mail.outbox) == 1
        no_leak(attacker, fake_llm)

    async def test_send_email_waits_for_approval_in_a_fork_of_an_old_run(
            self, today, user, fake_llm, attacker, client):
        source = await self.sent_email_record(today, user, fake_llm)
        assert source.agent_snapshot["tools"]["send_email"]["needs_approval"] is False
        fake_llm.script(Reply(text="I could not send it."))
        pk = started(await client.post(reverse("run_fork", args=[source.pk, 1])))
        await self.waits_for_approval(pk)
        assert (await finished(pk)).status == "succeeded"
        assert len(mail.outbox) == 1

    @pytest.mark.parametrize("mode", ["current", "recorded"])
    async def test_send_email_waits_for_approval_in_a_replay_with_live_tools(
            self, today, user, fake_llm, attacker, client, mode):
        source = await self.sent_email_record(today, user, fake_llm)
        imported = await import_(client, await aforge(source, attacker))
        fake_llm.script(Reply(text="I could not send it."))
        pk = started(await client.post(reverse("run_replay", args=[imported.pk]),
                                       {"tools": "live", "agent": mode}))
        await self.waits_for_approval(pk)
        assert (await finished(pk)).status == "succeeded"
        assert len(mail.outbox) == 1
        no_leak(attacker, fake_llm)

    async def test_a_replay_with_recorded_tools_sends_nothing(self, today, user, fake_llm,
                                                              attacker, client):
        source = await self.sent_email_record(today, user, fake_llm)
        imported = await import_(client, await aforge(source, attacker))
        pk = started(await client.post(reverse("run_replay", args=[imported.pk]),
                                       {"tools": "recorded", "agent": "recorded"}))
        await self.waits_for_approval(pk)  # the record holds no approval: a person decides
        await finished(pk)
        assert len(mail.outbox) == 1

    @pytest.mark.parametrize("how", ["fork", "replay-current", "replay-recorded"])
    async def test_a_tool_disabled_since_is_refused(self, today, user, fake_llm, attacker,
                                                    client, how):
        source = await record(today, user, fake_llm,
                              Reply(tool_calls=[("get_weather", '{"city": "Paris"}')]),
                              Reply(text="Sunny."))
        await sync_to_async(policies)(get_weather={"enabled": False})
        imported = await import_(client, await aforge(source, attacker))
        # Today the tool is not offered, so the first request already differs from the record
        # and goes live; a model that calls it anyway is refused.
        fake_llm.script(Reply(tool_calls=[("get_weather", '{"city": "Paris"}')]),
                        Reply(text="No weather today."))
        if how == "fork":
            response = await client.post(reverse("run_fork", args=[imported.pk, 1]))
        else:
            response = await client.post(reverse("run_replay", args=[imported.pk]), {
                "tools": "recorded", "agent": how.removeprefix("replay-")})
        run = await finished(started(response))
        tool = next(s for s in await steps(run) if s.kind == "tool")
        assert tool.status == "error" and "disabled by the administrator" in tool.text
        assert "replayed" not in tool.meta  # not served from the record either
        offered = [t["function"]["name"] for t in fake_llm.requests[0].get("tools") or []]
        assert "get_weather" not in offered and "calculator" in offered
        no_leak(attacker, fake_llm)

    @pytest.mark.parametrize("source_kind", ["imported", "old"])
    async def test_allowed_groups_are_todays(self, today, user, fake_llm, attacker, client,
                                             source_kind):
        source = await record(today, user, fake_llm,
                              Reply(tool_calls=[("calculator", '{"expression": "6*7"}')]),
                              Reply(text="42."))
        await sync_to_async(policies)(calculator={"allowed_groups": ["accountants"]})
        if source_kind == "imported":
            source = await import_(client, await aforge(source, attacker))
        # Not offered to this user today; a model that calls it anyway is refused.
        fake_llm.script(Reply(tool_calls=[("calculator", '{"expression": "6*7"}')]),
                        Reply(text="I may not calculate."))
        run = await finished(started(await client.post(
            reverse("run_replay", args=[source.pk]), {"tools": "live", "agent": "recorded"})))
        tool = next(s for s in await steps(run) if s.kind == "tool")
        assert "permission denied" in tool.text
        assert run.agent_snapshot["tools"]["calculator"]["allowed_groups"] == ["accountants"]
        no_leak(attacker, fake_llm)


# ------------------------------------------------------------------ limits


class TestLimits:
    """The bundle raises every limit to a billion; today's agent row's limits stop the run."""

    @pytest.mark.parametrize("how", ["fork", "resume", "replay-current", "replay-recorded"])
    async def test_todays_llm_call_limit_ends_the_run(self, today, user, fake_llm, attacker,
                                                      client, how):
        source = await record(today, user, fake_llm,
                              Reply(tool_calls=[("calculator", '{"expression": "1+1"}')]),
                              Reply(text="2."))
        imported = await import_(client, await aforge(
            source, attacker, **({"keep_steps": 2, "status": "running"} if how == "resume"
                                 else {"keep_steps": 2})))
        counter = iter(range(2, 1000))
        fake_llm.responder = lambda body: Reply(tool_calls=[
            ("calculator", json.dumps({"expression": f"{next(counter)}+1"}))])
        if how == "fork":
            response = await client.post(reverse("run_fork", args=[imported.pk, 2]))
        elif how == "resume":
            response = await client.post(reverse("run_resume", args=[imported.pk]))
        else:
            response = await client.post(reverse("run_replay", args=[imported.pk]), {
                "tools": "recorded", "agent": how.removeprefix("replay-")})
        run = await finished(started(response))
        assert run.status == "failed" and "limit of 4 LLM calls" in run.error
        assert run.llm_calls == 4 and len(fake_llm.requests) == 3  # one served, three live
        no_leak(attacker, fake_llm)
        assert_today(run, today, fake_llm)

    async def test_an_old_runs_limits_are_not_its_forks(self, today, user, fake_llm, attacker,
                                                        client):
        source = await record(today, user, fake_llm, Reply(text="Nothing to do."))
        snap = copy.deepcopy(source.agent_snapshot)
        snap["limits"] = dict.fromkeys(TODAY_LIMITS, BILLION)  # as an older row had them
        await Run.objects.filter(pk=source.pk).aupdate(agent_snapshot=snap)
        fork = await finished(started(await client.post(reverse("run_fork",
                                                                args=[source.pk, 1]))))
        assert fork.agent_snapshot["limits"] == TODAY_LIMITS


# ------------------------------------------------------------------ the record's own parts


class TestWhatTheRecordKeeps:
    """"As recorded" keeps the record's prompt and params, checked like an admin's."""

    async def test_a_forged_paradigm_or_params_are_refused_with_the_reason(
            self, today, user, fake_llm, attacker, client):
        source = await record(today, user, fake_llm, Reply(text="Nothing to do."))
        bundle = json.loads(await aforge(source, attacker))
        bundle["run"]["agent_snapshot"]["params"] = {"mode": "function_calling",
                                                     "max_iterations": BILLION}
        imported = await import_(client, json.dumps(bundle).encode())
        response = await client.post(reverse("run_replay", args=[imported.pk]),
                                     {"agent": "recorded"}, follow=True)
        assert b"max_iterations" in response.content and b"cannot go live" in response.content
        bundle["run"]["agent_snapshot"]["paradigm"] = "os.system"
        imported = await import_(client, json.dumps(bundle).encode())
        response = await client.post(reverse("run_fork", args=[imported.pk, 1]))
        assert response.status_code == 400 and b"unknown paradigm" in response.content
        assert await Run.objects.filter(parent_run__isnull=False).acount() == 0
        no_leak(attacker, fake_llm)

    async def test_the_pages_say_what_a_replay_binds_to(self, today, user, fake_llm, attacker,
                                                        client):
        source = await record(today, user, fake_llm, Reply(text="Nothing to do."))
        bundle = json.loads(await aforge(source, attacker))
        bundle["run"]["agent_snapshot"]["bound"] = {"agent": "Trusted", "how": "chosen"}
        imported = await import_(client, json.dumps(bundle).encode())
        page = (await client.get(reverse("run", args=[imported.pk]))).content.decode()
        assert "today's configuration of the agent named <strong>Office agent</strong>" in page
        assert "Bound to today's configuration" not in page  # even if its snapshot claims so
        fork_page = (await client.get(reverse("run_fork", args=[imported.pk, 1]))).content
        assert b"today's configuration of agent <strong>Office agent</strong>" in fork_page
        replay = await finished(started(await client.post(
            reverse("run_replay", args=[imported.pk]), {"agent": "recorded"})))
        page = (await client.get(reverse("run", args=[replay.pk]))).content.decode()
        assert "Bound to today's configuration of agent <strong>Office agent</strong>" in page
        assert "kept from the record: paradigm, system_prompt, params, tools offered" in page


# ------------------------------------------------------------------ credentials on pages


class TestCredentialsOnPages:
    async def test_the_run_header_never_shows_credentials_of_a_profile_url(self, user, client):
        snap = {"profiles": {"default": {
            "name": "p", "model": "m",
            "base_url": "https://mallory:hunter2@llm.example:8443/v1?api_key=sk-zzz#frag"}}}
        run = await Run.objects.acreate(user=user, input="q", status="succeeded",
                                        agent_snapshot=snap)
        html = (await client.get(reverse("run", args=[run.pk]))).content.decode()
        assert 'title="https://llm.example:8443/v1"' in html
        assert "hunter2" not in html and "sk-zzz" not in html and "mallory" not in html

    async def test_the_playground_blanks_credentials_in_an_endpoint_error(self, user, client):
        await ModelProfile.objects.acreate(name="Creds", base_url="http://bob:hunter2@127.0.0.1:9/v1",
                                           model="m", retries=0, timeout_s=2)
        run = await Run.objects.acreate(user=user, input="q", status="succeeded")
        await Step.objects.acreate(run=run, seq=1, kind="llm", input={"messages": []},
                                   started_at=timezone.now())
        page = await client.post(reverse("step_playground", args=[run.pk, 1]), {
            "messages": '[{"role": "user", "content": "hi"}]', "params": "{}",
            "profile": "Creds"})
        html = page.content.decode()
        assert page.status_code == 400 and "cannot reach http://127.0.0.1:9/v1" in html
        assert "hunter2" not in html


# ------------------------------------------------------------------ edit after approval


class TestEditAfterApproval:
    """Approved arguments edited at the checkpoint are new arguments: they are approved again."""

    def start(self, script):
        from agentlab.paradigms.react import ReAct
        from agentlab.paradigms.registry import validate_params
        from agentlab.runtime.loop import execute
        from agentlab.runtime.sinks import TeeSink
        from agentlab.tools.decorator import tool
        from agentlab.tools.executor import ToolPolicy
        from tests.scripted_model import ScriptedModel, make_context

        sent: list[dict] = []

        @tool
        def wire_money(to: str, amount: int) -> str:
            """Send money."""
            sent.append({"to": to, "amount": amount})
            return f"sent {amount} to {to}"

        class Published:
            async def status(self, status, detail):
                pass

            async def approval(self, step, expires_at):
                pass

        holder: dict = {}
        control = run_control.RunControl(
            1, publisher=Published(),
            settings=run_control.DebugSettings(break_tools=frozenset({"wire_money"})),
            cancel_run=lambda _id: holder["ctx"].cancel() or True)
        ctx, sink = make_context(
            ScriptedModel(script), [wire_money],
            policies={"wire_money": ToolPolicy(needs_approval=True)},
            params=validate_params("react", {"mode": "function_calling"}),
            checkpoint=control.checkpoint, approver=control.approve)
        ctx.sink = TeeSink(sink, control)
        holder["ctx"] = ctx
        task = asyncio.create_task(execute(ReAct(), ctx, "Pay Bob 10."))
        return control, task, sink, sent

    def script(self):
        from tests.scripted_model import call, reply
        return [reply("", call("wire_money", {"to": "bob", "amount": 10})), reply("Done.")]

    async def waiting(self, control, task, kind: str):
        await until(lambda: task.done() or any(p.waiting_for == kind
                                               for p in control.pauses.values()),
                    f"the run did not wait for {kind}")
        return next(p for p in control.pauses.values() if p.waiting_for == kind)

    async def approve_then_edit(self, control, task, new_input):
        first = await self.waiting(control, task, "approval")
        await control.act({"action": "approve", "seq": first.step.seq})
        checkpoint = await self.waiting(control, task, "step")
        await control.act({"action": "edit", "seq": checkpoint.step.seq, "input": new_input})
        await control.act({"action": "resume"})

    async def test_edited_arguments_wait_for_a_new_approval_and_a_denial_runs_nothing(self):
        control, task, sink, sent = self.start(self.script())
        await self.approve_then_edit(control, task, {"to": "mallory", "amount": 10_000})
        again = await self.waiting(control, task, "approval")
        assert again.step.input == {"to": "mallory", "amount": 10_000} and sent == []
        await control.act({"action": "deny", "seq": again.step.seq, "reason": "no"})
        await ended(task)
        assert sent == []
        assert [s.kind for s in sink.steps].count("approval") == 2
        tool_step = sink.of_kind("tool")[0]
        assert tool_step.status == "error" and tool_step.meta["denied"]
        assert "the user denied this call: no" in tool_step.text

    async def test_edited_arguments_run_once_approved_again(self):
        control, task, sink, sent = self.start(self.script())
        await self.approve_then_edit(control, task, {"to": "bob", "amount": 12})
        again = await self.waiting(control, task, "approval")
        await control.act({"action": "approve", "seq": again.step.seq})
        await ended(task)
        assert sent == [{"to": "bob", "amount": 12}]

    async def test_an_edit_that_changes_nothing_is_not_asked_again(self):
        control, task, sink, sent = self.start(self.script())
        await self.approve_then_edit(control, task, {"amount": 10, "to": "bob"})
        await ended(task)
        assert sent == [{"to": "bob", "amount": 10}]
        assert [s.kind for s in sink.steps].count("approval") == 1


# ------------------------------------------------------------------ the playground


MESSAGES = '[{"role": "user", "content": "hi"}]'
UNREADABLE = "the endpoint&#x27;s reply is not a chat completion this client can read"


@pytest.fixture
def llm_step(user, fake_llm) -> Step:
    ModelProfile.objects.create(name="Scripted", base_url=fake_llm.base_url,
                                model="scripted-model", retries=0)
    run = Run.objects.create(user=user, input="hi", status="succeeded")
    return Step.objects.create(run=run, seq=1, kind="llm", input={"messages": []},
                               started_at=timezone.now())


class TestPlayground:
    @pytest.mark.parametrize(("messages", "params", "error"), [
        (MESSAGES, '{"temperature": "hot"}', "parameters: temperature must be a number"),
        (MESSAGES, '{"temperature": NaN}', "parameters: NaN is not a JSON number"),
        (MESSAGES, '{"temperature": 1e999}', "parameters: the number 1e999 is out of range"),
        (MESSAGES, '{"max_tokens": "ten"}', "parameters: max_tokens must be a whole number"),
        (MESSAGES, '{"max_tokens": true}', "parameters: max_tokens must be a whole number"),
        (MESSAGES, '{"stop": 5}', "parameters: stop must be text or a list"),
        (MESSAGES, '{"tools": "calculator"}', "parameters: tools must be a list"),
        (MESSAGES, '{"tool_choice": 3}', "parameters: tool_choice must be one of auto"),
        (MESSAGES, '{"response_format": "json"}', "parameters: response_format must be an"),
        ("[]", "{}", "messages: give at least one message"),
        ('[{"role": "wizard", "content": "hi"}]', "{}", "message 1: the role must be one of"),
        ('[{"role": ["user"]}]', "{}", "message 1: the role must be one of"),
        ('[{"role": "user", "content": 42}]', "{}", "message 1: the content must be text"),
        ('[{"role": "user", "content": [1]}]', "{}", "message 1: the content must be text"),
        ('[{"role": "assistant", "tool_calls": ["x"]}]', "{}", "message 1: &quot;tool_calls&quot;"),
        ('[{"role": "assistant", "tool_calls": [{"function": "x"}]}]', "{}",
         "message 1: &quot;tool_calls&quot; must be a list"),
        ('[{"role": "tool", "tool_call_id": 7, "content": "x"}]', "{}",
         "message 1: &quot;tool_call_id&quot; must be text"),
        ("[" * 100_000, "{}", "messages: nested too deeply"),
        (json.dumps([{"role": "user", "content": "x"}] * 501), "{}",
         "messages: 501 messages, over the limit of 500"),
        (json.dumps([{"role": "user", "content": "x" * 1_000_001}]), "{}",
         "over the limit of 1,000,000"),
    ])
    def test_bad_input_is_a_sentence_on_the_page(self, client_sync, llm_step, fake_llm,
                                                 messages, params, error):
        page = client_sync.post(reverse("step_playground", args=[llm_step.run_id, 1]),
                                {"messages": messages, "params": params, "profile": "Scripted"})
        assert page.status_code == 400 and error in page.content.decode()
        assert fake_llm.requests == []

    @pytest.mark.parametrize(("body", "status", "shown"), [
        (b'{"choices": [{"message": "x"}]}', 400, UNREADABLE),
        (b'{"choices": [{"message": {"tool_calls": [{"function": "x"}]}}]}', 400, UNREADABLE),
        (b'{"choices": "x"}', 400, "the model call failed: the endpoint answered without any"),
        (b"[]", 400, "the model call failed: the endpoint answered without any choice"),
        (b'"just text"', 400, "the model call failed: the endpoint answered without any"),
        (b"not json at all", 400,
         "the model call failed: the endpoint&#x27;s reply is not JSON: "
         "&#x27;not json at all&#x27;"),
        # A usage a server garbles is no usage: the answer itself is fine.
        (b'{"choices": [{"message": {"content": "hi"}}], "usage": {"prompt_tokens": "x"}}',
         200, "hi"),
        (b'{"choices": [{"message": {"content": 42}}]}', 400, UNREADABLE),
        (b'{"choices": [{"message": {"content": ["odd", "parts"]}}]}', 200, "odd"),
    ])
    def test_an_odd_reply_is_a_sentence_on_the_page(self, client_sync, llm_step, body, status,
                                                    shown):
        server = RawServer(body)
        try:
            ModelProfile.objects.create(name="Odd", base_url=server.base_url, model="m",
                                        retries=0, timeout_s=5)
            page = client_sync.post(reverse("step_playground", args=[llm_step.run_id, 1]),
                                    {"messages": MESSAGES, "params": "{}", "profile": "Odd"})
        finally:
            server.close()
        assert page.status_code == status and shown in page.content.decode()

    def test_an_odd_recorded_step_still_opens(self, client_sync, llm_step):
        Step.objects.filter(pk=llm_step.pk).update(
            input={"messages": "not a list", "temperature": "hot"}, meta=["profile"],
            output={"text": ["x"], "tool_calls": "y", "usage": 3})
        page = client_sync.get(reverse("step_playground", args=[llm_step.run_id, 1]))
        assert page.status_code == 200


@pytest.fixture
def client_sync(user):
    """The sync test client, logged in (`client` here is the async one)."""
    from django.test import Client

    c = Client()
    c.force_login(user)
    return c
