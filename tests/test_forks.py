"""Replay, fork and resume through the real runner: ReAct, the openai SDK against the scripted
OpenAI-compatible server (deterministic replies), the tools executor and the database.

`fake_llm.requests` counts what reached the model live; everything else comes from the record."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from django.urls import reverse

from agentlab.forks.plans import ForkError, NeedsAgent, plan_fork, plan_replay, plan_resume
from agentlab.models import Agent, Tool
from agentlab.runs.execution import execute_run
from agentlab.runs.registry import REGISTRY
from agentlab.runs.snapshot import create_run
from tests.fake_openai import Reply
from traces.display.renderer import StepRenderer
from traces.models import Run, Step

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "What is 6*7, plus 1?"
SCRIPT = (Reply(tool_calls=[("calculator", '{"expression": "6*7"}')]),
          Reply(tool_calls=[("calculator", '{"expression": "42+1"}')]),
          Reply(text="6*7+1 is 43."))


async def record(agent, user, fake_llm) -> Run:
    """A finished source run: llm, tool, llm, tool, llm, final."""
    fake_llm.script(*SCRIPT)
    run = await sync_to_async(create_run)(agent, user, QUESTION)
    await execute_run(run)
    fake_llm.reset()
    return await Run.objects.aget(pk=run.pk)


async def execute(plan) -> Run:
    await execute_run(plan.run, prepare=plan.prepare)
    return await Run.objects.aget(pk=plan.run.pk)


async def steps(run: Run) -> list[Step]:
    return [s async for s in Step.objects.filter(run=run).order_by("seq")]


def content(step: Step) -> tuple:
    """What a user compares between two runs' steps (not timings, not replay marks)."""
    out = step.output if isinstance(step.output, dict) else {}
    return (step.seq, step.kind, step.name, step.input, step.text, step.status,
            out.get("tool_calls"), out.get("observation"))


async def test_a_fork_at_a_tool_step_with_an_edited_observation_goes_live_after_it(
        agent, user, fake_llm):
    source = await record(agent, user, fake_llm)
    src = await steps(source)
    assert [s.kind for s in src] == ["llm", "tool", "llm", "tool", "llm", "final"]
    fake_llm.script(Reply(text="6*7+1 is 101."))
    plan = await sync_to_async(plan_fork)(source, user, 2, edited_observation="100")
    fork = await execute(plan)
    new = await steps(fork)
    assert fork.status == "succeeded" and fork.final_answer == "6*7+1 is 101."
    assert (fork.parent_run_id, fork.fork_seq) == (source.pk, 2)
    assert content(new[0]) == content(src[0])
    assert new[1].text == "100" and content(new[1])[:4] == content(src[1])[:4]
    assert new[0].meta["replayed"] and new[0].meta["source_seq"] == 1
    assert new[1].meta["edited"] and new[1].meta["source_seq"] == 2
    assert "replayed" not in new[2].meta and "diverged_from" not in new[2].meta
    # Only the call after the fork reached the model, and it saw the edited observation.
    assert len(fake_llm.requests) == 1
    tool_messages = [m for m in fake_llm.requests[0]["messages"] if m["role"] == "tool"]
    assert tool_messages[-1]["content"] == "100"
    assert fork.agent_snapshot["fork"] == {"of": source.pk, "seq": 2, "edited": "observation",
                                           "resume": False}


async def test_a_fork_at_an_llm_step_with_an_edited_reply_answers_with_the_edit(
        agent, user, fake_llm):
    source = await record(agent, user, fake_llm)
    plan = await sync_to_async(plan_fork)(source, user, 3, edited_reply={
        "text": "It is 42, I am sure.", "tool_calls": [], "finish_reason": "stop"})
    fork = await execute(plan)
    assert fork.final_answer == "It is 42, I am sure." and fake_llm.requests == []
    assert [s.kind for s in await steps(fork)] == ["llm", "tool", "llm", "final"]


async def test_a_replay_with_recorded_tools_calls_no_model_and_does_not_diverge(
        agent, user, fake_llm):
    source = await record(agent, user, fake_llm)
    replay = await execute(await sync_to_async(plan_replay)(source, user, tools="recorded"))
    assert fake_llm.requests == []
    assert replay.status == "succeeded" and replay.final_answer == source.final_answer
    assert (replay.parent_run_id, replay.fork_seq) == (source.pk, None)
    snap = replay.agent_snapshot
    assert snap["replay_of"] == source.pk and "first_divergence" not in snap
    assert snap["replay"] == {"tools": "recorded", "agent": "current", "served_llm": 3,
                              "live_llm": 0, "unused_llm": [], "served_tools": 2,
                              "live_tools": 0}
    assert [content(s) for s in await steps(replay)] == \
           [content(s) for s in await steps(source)]


async def test_a_replay_after_a_prompt_change_marks_the_first_llm_step_as_divergent(
        agent, user, fake_llm):
    source = await record(agent, user, fake_llm)
    agent.system_prompt = "Always answer in French."
    await agent.asave()
    fake_llm.script(Reply(text="43, en français."))
    replay = await execute(await sync_to_async(plan_replay)(source, user, tools="live"))
    first = (await steps(replay))[0]
    assert first.meta["diverged_from"] == 1 and first.meta["divergence_fields"] == ["messages"]
    assert replay.agent_snapshot["first_divergence"] == {
        "seq": 1, "source_seq": 1, "fields": ["messages"],
        "detail": "message 1 (system) differs from the recorded request"}
    assert len(fake_llm.requests) == 1 and replay.final_answer == "43, en français."


async def test_the_recorded_agent_replays_without_the_later_prompt_change(agent, user, fake_llm):
    source = await record(agent, user, fake_llm)
    agent.system_prompt = "Always answer in French."
    await agent.asave()
    replay = await execute(await sync_to_async(plan_replay)(source, user, agent="recorded"))
    assert fake_llm.requests == [] and "first_divergence" not in replay.agent_snapshot


async def test_a_fork_of_an_old_run_goes_live_on_todays_profile_with_the_recorded_prompt(
        agent, user, fake_llm):
    source = await record(agent, user, fake_llm)
    profile = agent.model_profile
    profile.model = "model-of-today"
    await profile.asave()
    agent.system_prompt = "Always answer in French."
    await agent.asave()
    fake_llm.script(Reply(text="6*7+1 is 101."))
    fork = await execute(await sync_to_async(plan_fork)(source, user, 2,
                                                        edited_observation="100"))
    assert fork.final_answer == "6*7+1 is 101." and len(fake_llm.requests) == 1
    sent = fake_llm.requests[0]
    assert sent["model"] == "model-of-today"  # today's profile
    assert "French" not in sent["messages"][0]["content"]  # the record's (empty) prompt
    assert fork.agent_snapshot["bound"] == {
        "agent_id": agent.pk, "agent": "Calc agent", "how": "the run's agent",
        "recorded": ["paradigm", "system_prompt", "params", "tools offered"]}


async def test_a_renamed_agent_is_still_the_runs_and_a_deleted_one_gives_way_to_its_namesake(
        agent, user, fake_llm):
    source = await record(agent, user, fake_llm)
    agent.name = "Calculator v2"
    await agent.asave()
    replay = await execute(await sync_to_async(plan_replay)(source, user))
    assert replay.agent_id == agent.pk and replay.agent_snapshot["bound"]["agent"] == \
        "Calculator v2"
    namesake = await sync_to_async(lambda: Agent.objects.create(
        name="Calc agent", paradigm="react", model_profile=agent.model_profile,
        params={"mode": "function_calling"}))()
    await agent.adelete()
    source = await Run.objects.aget(pk=source.pk)
    assert source.agent_id is None
    replay = await execute(await sync_to_async(plan_replay)(source, user, tools="live"))
    assert replay.agent_id == namesake.pk
    assert replay.agent_snapshot["bound"]["how"] == "the agent of the same name"
    await namesake.adelete()
    with pytest.raises(NeedsAgent, match="has no agent any more: its agent 'Calc agent' is "
                                         "not configured here"):
        await sync_to_async(plan_replay)(source, user)


async def test_a_replay_as_recorded_offers_only_the_recorded_tools_that_the_agent_still_has(
        agent, user, fake_llm):
    source = await record(agent, user, fake_llm)
    await sync_to_async(agent.tools.add)(await Tool.objects.aget(name="current_time"))
    recorded = await sync_to_async(plan_replay)(source, user, agent="recorded")
    assert set(recorded.run.agent_snapshot["tools"]) == {"calculator"}
    current = await sync_to_async(plan_replay)(source, user, agent="current")
    assert set(current.run.agent_snapshot["tools"]) == {"calculator", "current_time"}
    replay = await execute(recorded)
    assert fake_llm.requests == [] and "first_divergence" not in replay.agent_snapshot


async def interrupt_after(run: Run, seq: int) -> Run:
    """What a dead process leaves: steps up to `seq`, the last one still running."""
    await Step.objects.filter(run=run, seq__gt=seq).adelete()
    await Step.objects.filter(run=run, seq=seq).aupdate(status="running", output=None)
    await Run.objects.filter(pk=run.pk).aupdate(status="interrupted", final_answer="")
    return await Run.objects.aget(pk=run.pk)


async def test_resuming_an_interrupted_run_serves_its_steps_and_asks_only_the_missing_call(
        agent, user, fake_llm):
    source = await interrupt_after(await record(agent, user, fake_llm), 3)
    fake_llm.script(Reply(tool_calls=[("calculator", '{"expression": "42+1"}')]),
                    Reply(text="43."))
    resumed = await execute(await sync_to_async(plan_resume)(source, user))
    assert resumed.status == "succeeded" and resumed.final_answer == "43."
    assert resumed.fork_seq == 3 and resumed.agent_snapshot["fork"]["resume"] is True
    assert len(fake_llm.requests) == 2  # step 3's call (never answered) and the last one
    new = await steps(resumed)
    assert [s.meta.get("replayed", False) for s in new[:3]] == [True, True, False]


async def test_a_finished_run_cannot_resume_and_a_missing_step_cannot_fork(agent, user, fake_llm):
    source = await record(agent, user, fake_llm)
    with pytest.raises(ForkError, match="only an interrupted, cancelled"):
        await sync_to_async(plan_resume)(source, user)
    with pytest.raises(ForkError, match="has no step 99"):
        await sync_to_async(plan_fork)(source, user, 99)
    with pytest.raises(ForkError, match="only a tool step has an observation"):
        await sync_to_async(plan_fork)(source, user, 1, edited_observation="x")


# ------------------------------------------------------------------ views


@pytest.fixture
async def client_for():
    async def make(user) -> AsyncClient:
        client = AsyncClient()
        await client.aforce_login(user)
        return client
    return make


async def finished(response) -> Run:
    """The run a view redirected to, once its task is done."""
    assert response.status_code == 302, response.content[:500]
    pk = int(response["Location"].rstrip("/").rsplit("/", 1)[1])
    assert response["Location"] == reverse("run", args=[pk])
    if task := REGISTRY.task(pk):
        await task
    return await Run.objects.aget(pk=pk)


async def test_the_replay_button_starts_a_replay_and_opens_it(agent, user, fake_llm, client_for):
    source = await record(agent, user, fake_llm)
    client = await client_for(user)
    response = await client.post(reverse("run_replay", args=[source.pk]), {"tools": "recorded"})
    replay = await finished(response)
    assert replay.status == "succeeded" and replay.agent_snapshot["replay_of"] == source.pk
    assert fake_llm.requests == []


async def test_the_fork_page_shows_the_observation_and_forks_with_the_edit(
        agent, user, fake_llm, client_for):
    source = await record(agent, user, fake_llm)
    client = await client_for(user)
    page = await client.get(reverse("run_fork", args=[source.pk, 2]))
    assert page.status_code == 200
    assert b'<textarea name="observation" rows="12">\n42</textarea>' in page.content
    fake_llm.script(Reply(text="It is 100."))
    response = await client.post(reverse("run_fork", args=[source.pk, 2]),
                                 {"observation": "100\r\n"})
    fork = await finished(response)
    assert fork.fork_seq == 2 and fork.final_answer == "It is 100."
    assert (await Step.objects.aget(run=fork, seq=2)).text == "100\n"


async def test_bad_tool_calls_in_a_fork_form_are_shown_not_run(agent, user, fake_llm, client_for):
    source = await record(agent, user, fake_llm)
    client = await client_for(user)
    response = await client.post(reverse("run_fork", args=[source.pk, 1]),
                                 {"text": "", "tool_calls": "[{oops"})
    assert response.status_code == 400 and b"tool calls: not valid JSON" in response.content
    assert await Run.objects.acount() == 1


async def test_the_resume_button_refuses_a_finished_run_with_a_message(
        agent, user, fake_llm, client_for):
    source = await record(agent, user, fake_llm)
    client = await client_for(user)
    response = await client.post(reverse("run_resume", args=[source.pk]), follow=True)
    assert b"only an interrupted, cancelled" in response.content
    assert await Run.objects.acount() == 1


async def test_another_users_run_is_404_for_every_action(agent, user, other_user, fake_llm,
                                                         client_for):
    source = await record(agent, user, fake_llm)
    client = await client_for(other_user)
    assert (await client.post(reverse("run_replay", args=[source.pk]))).status_code == 404
    assert (await client.post(reverse("run_resume", args=[source.pk]))).status_code == 404
    assert (await client.get(reverse("run_fork", args=[source.pk, 2]))).status_code == 404
    assert (await client.post(reverse("run_fork", args=[source.pk, 2]))).status_code == 404
    assert await Run.objects.acount() == 1


async def test_staff_may_fork_another_users_run_and_own_the_fork(agent, user, staff, fake_llm,
                                                                  client_for):
    source = await record(agent, user, fake_llm)
    client = await client_for(staff)
    fork = await finished(await client.post(reverse("run_fork", args=[source.pk, 6])))
    assert fork.user_id == staff.pk and fork.final_answer == source.final_answer


async def test_anonymous_users_are_sent_to_log_in(agent, user, fake_llm):
    source = await record(agent, user, fake_llm)
    response = await AsyncClient().post(reverse("run_replay", args=[source.pk]))
    assert response.status_code == 302 and reverse("login") in response["Location"]


async def test_the_snippets_show_the_divergence_the_origin_and_the_step_links(
        agent, user, fake_llm):
    from django.template.loader import render_to_string

    source = await record(agent, user, fake_llm)
    agent.system_prompt = "Always answer in French."
    await agent.asave()
    fake_llm.script(Reply(text="43."))
    replay = await execute(await sync_to_async(plan_replay)(source, user, tools="live"))
    first = (await steps(replay))[0]
    header = await sync_to_async(render_to_string)("forks/_run_actions.html", {"run": replay})
    assert "Left the record at" in header and 'href="?step=1"' in header
    assert "message 1 (system) differs" in header
    assert f"{reverse('run_diff')}?a={source.pk}&amp;b={replay.pk}" in header
    assert "Resume" not in header  # a succeeded run has nothing to resume
    assert "today's configuration of agent <strong>Calc agent</strong>" in header
    # The step's links as every page and the live socket render them.
    links = StepRenderer(replay).html(first.to_record().to_dict())
    assert "diverged from #1" in links
    assert reverse("run_fork", args=[replay.pk, 1]) in links
    assert reverse("step_playground", args=[replay.pk, 1]) in links
    interrupted = await interrupt_after(source, 3)
    header = await sync_to_async(render_to_string)("forks/_run_actions.html",
                                                   {"run": interrupted})
    assert reverse("run_resume", args=[source.pk]) in header and "Diff with" not in header


async def test_an_llm_step_form_shows_its_tool_calls_and_an_unchanged_submit_edits_nothing(
        agent, user, fake_llm, client_for):
    source = await record(agent, user, fake_llm)
    client = await client_for(user)
    page = (await client.get(reverse("run_fork", args=[source.pk, 1]))).content.decode()
    assert "&quot;expression&quot;: &quot;6*7&quot;" in page
    fields = {"text": "", "tool_calls": '[{"name": "calculator", '
                                        '"arguments": {"expression": "6*7"}}]'}
    fake_llm.script(*SCRIPT[1:])
    fork = await finished(await client.post(reverse("run_fork", args=[source.pk, 1]), fields))
    assert fork.agent_snapshot["fork"]["edited"] is None
    assert len(fake_llm.requests) == 2  # steps 3 and 5 live
    assert fork.final_answer == source.final_answer


async def test_member_agents_with_their_own_models_and_tools_follow_the_record():
    from agentlab.forks.plans import ReplayPlan
    from agentlab.forks.recorded_tools import ToolRecording
    from agentlab.llm.replay import Recording
    from agentlab.runtime.scopes import AgentSpec
    from agentlab.tools.executor import ToolExecutor
    from tests.scripted_model import ScriptedModel, make_context, reply

    member_live = ScriptedModel([])
    spec = AgentSpec(name="critic", paradigm="react", models={"default": member_live},
                     executor=ToolExecutor({}))
    ctx, _ = make_context(ScriptedModel([]), agents={"critic": spec})
    request = {"messages": [{"role": "user", "content": "critique"}]}
    plan = ReplayPlan(run=None, recording=Recording([(4, request, reply("fine").to_dict())]),
                      tools=ToolRecording([]))
    plan.prepare(ctx)
    member = ctx.agents["critic"]
    assert (await member.models["default"].chat(request["messages"])).text == "fine"
    assert member_live.requests == [] and plan.recording.served == [4]
    assert member.executor.recording is plan.tools  # its tools are served from the record too
