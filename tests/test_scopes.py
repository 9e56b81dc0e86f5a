"""Sub-runs inside one run (ctx.scope, ctx.sub_run, ctx.run_agent) with scripted models.

A scripted model is right here: these tests are about which steps get which role, parent, model,
prompt and tools, not about what a real model would say.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from agentlab.runtime.limits import IterationLimit
from agentlab.runtime.loop import execute
from agentlab.runtime.scopes import AgentSpec
from agentlab.tools.decorator import tool
from agentlab.tools.executor import ToolExecutor
from tests.scripted_model import ScriptedModel, make_context
from traces.schema import Step


@tool
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


def json_final(answer: str) -> str:
    return json.dumps({"thought": "done", "action": "final_answer", "action_input": answer})


async def test_steps_in_a_scope_get_its_parent_and_role_and_model():
    default, executor_model = ScriptedModel([]), ScriptedModel([json_final("42")])
    ctx, sink = make_context(default, [shout], models={"executor": executor_model})
    plan = await ctx.emit(Step(kind="plan", role="planner", text="1. compute"))
    answer = await ctx.sub_run("react", "compute", role="executor", parent=plan.seq,
                               params={"mode": "json", "max_iterations": 2})
    assert answer == "42"
    llm = sink.of_kind("llm")
    assert [(s.role, s.parent) for s in llm] == [("executor", plan.seq)]
    assert len(executor_model.requests) == 1 and not default.requests
    # Outside the scope, nothing is inherited.
    after = await ctx.emit(Step(kind="thought", text="back at the top"))
    assert (after.role, after.parent) == ("agent", None)


async def test_scope_params_prompt_and_history_are_the_sub_runs_own():
    model = ScriptedModel([json_final("ok")])
    ctx, _ = make_context(model, [shout], params={"mode": "text"}, system_prompt="TOP PROMPT")
    history = [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "hi"}]
    with ctx.scope(role="member", params={"mode": "json"}, system_prompt="MEMBER PROMPT",
                   history=history):
        assert ctx.params == {"mode": "json"}
        assert ctx.history == history
        await ctx.sub_run("react", "go", role="member")
    assert ctx.params == {"mode": "text"} and ctx.system_prompt == "TOP PROMPT"
    sent = model.requests[0]["messages"]
    assert sent[0]["content"].startswith("MEMBER PROMPT")
    assert sent[1:3] == history


async def test_concurrent_scopes_do_not_leak_into_each_other():
    ctx, sink = make_context(ScriptedModel([]), [shout])

    async def member(name: str) -> None:
        with ctx.scope(role=name):
            await asyncio.sleep(0)  # a turn of the loop: the other member runs in between
            await ctx.emit(Step(kind="thought", text=name))
            await asyncio.sleep(0)
            await ctx.tool("shout", {"text": name})

    await asyncio.gather(member("alpha"), member("beta"))
    assert sorted({s.role for s in sink.steps}) == ["alpha", "beta"]
    assert all(s.role == s.text.lower() for s in sink.steps)


async def test_run_agent_uses_the_members_models_tools_and_prompt():
    run_model, member_model = ScriptedModel([]), ScriptedModel([
        json.dumps({"thought": "t", "action": "shout", "action_input": {"text": "hey"}}),
        json_final("HEY"),
    ])
    ctx, sink = make_context(run_model, [])
    ctx.agents = {"Helper": AgentSpec(
        name="Helper", paradigm="react", params={"mode": "json"}, system_prompt="BE HELPFUL",
        executor=ToolExecutor({"shout": shout}), models={"default": member_model})}
    answer = await ctx.run_agent(ctx.agents["Helper"], "shout hey", role="Helper")
    assert answer == "HEY" and not run_model.requests
    assert member_model.requests[0]["messages"][0]["content"].startswith("BE HELPFUL")
    tools = sink.of_kind("tool")
    assert [(t.name, t.role, t.text) for t in tools] == [("shout", "Helper", "HEY")]


async def test_a_sub_run_out_of_iterations_raises_iteration_limit_for_the_caller():
    looping = json.dumps({"thought": "t", "action": "shout", "action_input": {"text": "a"}})
    ctx, _ = make_context(ScriptedModel([looping, looping.replace('"a"', '"b"')]), [shout])
    with pytest.raises(IterationLimit):
        await ctx.sub_run("react", "never ends", role="executor",
                          params={"mode": "json", "max_iterations": 2})


async def test_a_react_run_out_of_iterations_still_fails_the_run_with_the_reason():
    looping = json.dumps({"thought": "t", "action": "shout", "action_input": {"text": "a"}})
    from agentlab.paradigms.registry import get_paradigm

    ctx, _ = make_context(ScriptedModel([looping]), [shout],
                          params={"mode": "json", "max_iterations": 1})
    outcome = await execute(get_paradigm("react")(), ctx, "never ends")
    assert outcome.status == "failed"
    assert "max_iterations (1)" in outcome.error
