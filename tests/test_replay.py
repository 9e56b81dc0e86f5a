"""ReplayModel and RecordedExecutor (pure): what a replay serves, where it says it diverged, and
what goes live. The live side is a ScriptedModel (control flow only: which calls reach it)."""

from __future__ import annotations

import asyncio
import json

import pytest

from agentlab.forks.recorded_tools import (
    RecordedApproval,
    RecordedExecutor,
    RecordedTool,
    ToolRecording,
)
from agentlab.llm.replay import (
    RecordedCall,
    Recording,
    ReplayMismatch,
    ReplayModel,
    replay_models,
    result_from_dict,
)
from agentlab.paradigms.react import ReAct
from agentlab.runtime.context import Approval
from agentlab.runtime.loop import execute
from agentlab.tools.decorator import tool
from agentlab.tools.executor import ToolExecutor, ToolPolicy
from tests.scripted_model import ScriptedModel, call, make_context, reply
from traces.schema import Step

LIVE_CALLS: list[str] = []


@tool
def lookup(city: str) -> str:
    """Look up a city."""
    LIVE_CALLS.append(city)
    return f"live facts about {city}"


def req(system: str, user: str = "hi", **extra) -> dict:
    return {"messages": [{"role": "system", "content": system},
                         {"role": "user", "content": user}], **extra}


def recorded(seq: int, request: dict, text: str) -> RecordedCall:
    # As read back from the database: JSON round-tripped.
    return RecordedCall(seq, json.loads(json.dumps(request)), reply(text).to_dict())


async def ask(model, request: dict):
    return await model.chat(request["messages"], tools=request.get("tools"),
                            stop=request.get("stop"))


# ------------------------------------------------------------------ ReplayModel


async def test_serves_the_recorded_replies_in_order_without_calling_the_live_model():
    live = ScriptedModel([])
    model = ReplayModel([recorded(1, req("S", "a"), "first"), recorded(3, req("S", "b"), "second")],
                        live)
    assert (await ask(model, req("S", "a"))).text == "first"
    assert (await ask(model, req("S", "b"))).text == "second"
    assert live.requests == [] and model.recording.served == [1, 3]
    assert model.recording.first_divergence is None and model.recording.unused == []


async def test_parallel_requests_in_another_order_each_get_their_own_reply():
    model = ReplayModel([recorded(2, req("S", "paris"), "P"), recorded(3, req("S", "lyon"), "L")])
    lyon, paris = await asyncio.gather(ask(model, req("S", "lyon")), ask(model, req("S", "paris")))
    assert (lyon.text, paris.text) == ("L", "P")
    assert model.recording.divergences == []


async def test_a_changed_system_prompt_is_reported_with_the_step_and_field_then_goes_live():
    live = ScriptedModel(["live one", "live two"])
    model = ReplayModel([recorded(1, req("Old prompt"), "rec"), recorded(3, req("X"), "rec2")],
                        live)
    first = await ask(model, req("New prompt"))
    assert first.text == "live one"
    div = model.recording.first_divergence
    assert div.source_seq == 1 and div.fields == ("messages",)
    assert div.detail == "message 1 (system) differs from the recorded request"
    # Once off the record, stay off: even a request that matches a later recorded call is live.
    assert (await ask(model, req("X"))).text == "live two"
    assert len(live.requests) == 2 and model.recording.unused == [1, 3]


async def test_a_different_tool_list_is_named_as_the_differing_field():
    model = ReplayModel([recorded(1, req("S", tools=[{"name": "a"}]), "rec")],
                        ScriptedModel(["live"]))
    await ask(model, req("S", tools=[{"name": "b"}]))
    assert model.recording.first_divergence.fields == ("tools",)


async def test_without_a_live_model_a_divergent_request_fails_clearly():
    model = ReplayModel([recorded(4, req("Old"), "rec")])
    with pytest.raises(ReplayMismatch, match=r"the recording has no reply for this request "
                                             r"\(step 4\): message 1 \(system\) differs"):
        await ask(model, req("New"))


async def test_an_exhausted_replay_is_a_divergence_and_goes_live_or_fails():
    model = ReplayModel([recorded(1, req("S"), "rec")], ScriptedModel(["more"]))
    await ask(model, req("S"))
    assert (await ask(model, req("S", "again"))).text == "more"
    assert model.recording.first_divergence.fields == ("recording",)
    no_live = ReplayModel([])
    with pytest.raises(ReplayMismatch, match="the recording has no reply for this request"):
        await ask(no_live, req("S"))


async def test_a_fork_serves_up_to_its_step_with_the_edit_then_goes_live_without_divergence():
    calls = [recorded(1, req("S", "a"), "one"), recorded(3, req("S", "b"), "three"),
             recorded(5, req("S", "c"), "five")]
    live = ScriptedModel(["live five"])
    model = ReplayModel(calls, live, fork_at=3, edited_reply={"text": "EDITED"})
    assert (await ask(model, req("S", "a"))).text == "one"
    third = await ask(model, req("S", "b"))
    assert third.text == "EDITED" and third.cost_usd == 0.0
    assert (await ask(model, req("S", "c"))).text == "live five"
    assert model.recording.divergences == [] and model.recording.live_calls == 1
    claimed = model.recording.claim(req("S", "b"))
    assert (claimed.kind, claimed.source_seq) == ("edited", 3)


async def test_roles_share_one_recording_and_go_live_on_their_own_model():
    recording = Recording([recorded(1, req("planner"), "plan"), recorded(2, req("solver"), "ok")])
    planner, default = ScriptedModel([], profile_name="p"), ScriptedModel(["x"], profile_name="d")
    models = replay_models({"default": default, "planner": planner}, recording)
    assert (await ask(models["planner"], req("planner"))).text == "plan"
    assert (await ask(models["default"], req("solver"))).text == "ok"
    assert (await ask(models["default"], req("more"))).text == "x"
    assert planner.requests == [] and len(default.requests) == 1
    assert models["planner"].profile_name == "p"


def test_an_edited_reply_with_bare_tool_calls_becomes_a_chat_result():
    result = result_from_dict({"text": "", "tool_calls": [
        {"name": "lookup", "arguments": {"city": "Paris"}}], "unknown": 1})
    assert result.tool_calls[0].name == "lookup" and result.tool_calls[0].id == "call_0"
    assert json.loads(result.tool_calls[0].raw_arguments) == {"city": "Paris"}


async def test_a_react_run_replayed_from_its_own_steps_makes_no_live_call():
    script = [reply("", call("lookup", {"city": "Paris"})), reply("Paris is lovely.")]
    ctx, sink = make_context(ScriptedModel(script), [lookup])
    first = await execute(ReAct(), ctx, "Tell me about Paris")
    calls = [RecordedCall(s.seq, json.loads(json.dumps(s.input)), s.output)
             for s in sink.steps if s.kind == "llm"]
    tools = [RecordedTool(s.seq, s.name, s.input, s.output) for s in sink.steps
             if s.kind == "tool"]
    LIVE_CALLS.clear()
    live = ScriptedModel([])
    recording = Recording(calls)
    ctx2, sink2 = make_context(ReplayModel(recording, live), [lookup])
    ctx2.executor = RecordedExecutor(ctx2.executor, ToolRecording(tools))
    second = await execute(ReAct(), ctx2, "Tell me about Paris")
    assert second.answer == first.answer == "Paris is lovely."
    assert live.requests == [] and LIVE_CALLS == [] and recording.divergences == []
    strip = ("started_at", "duration_ms")
    assert [{k: v for k, v in s.to_dict().items() if k not in strip} for s in sink2.steps] == \
           [{k: v for k, v in s.to_dict().items() if k not in strip} for s in sink.steps]


# ------------------------------------------------------------------ RecordedExecutor


def tool_result(name: str, args: dict, observation: str, ok: bool = True) -> dict:
    return {"tool": name, "arguments": args, "ok": ok, "output": observation,
            "observation": observation, "error": None, "error_type": None,
            "truncated": False, "duration_ms": 1.0}


def executor(record: ToolRecording, **policies) -> RecordedExecutor:
    return RecordedExecutor(ToolExecutor({"lookup": lookup}, policies), record)


async def test_recorded_results_are_served_by_name_and_normalised_arguments():
    LIVE_CALLS.clear()
    record = ToolRecording([
        RecordedTool(2, "lookup", {"city": "Paris"}, tool_result("lookup", {}, "recorded P")),
        RecordedTool(4, "lookup", {"city": "Lyon"}, tool_result("lookup", {}, "recorded L")),
    ])
    ex = executor(record)
    assert (await ex.run("lookup", {"city": " Lyon "})).observation == "recorded L"
    assert (await ex.run("lookup", {"city": "Paris"})).observation == "recorded P"
    assert (await ex.run("lookup", {"city": "Paris"})).observation == "live facts about Paris"
    assert LIVE_CALLS == ["Paris"] and record.served == [4, 2] and record.live_calls == 1
    assert record.claim("lookup", {"city": "Lyon"}).source_seq == 4


async def test_a_fork_serves_tools_up_to_its_step_with_the_edited_observation():
    LIVE_CALLS.clear()
    record = ToolRecording([
        RecordedTool(2, "lookup", {"city": "Paris"}, tool_result("lookup", {}, "recorded P")),
        RecordedTool(6, "lookup", {"city": "Rome"}, tool_result("lookup", {}, "recorded R")),
    ], fork_at=2, edited_observation="Paris is closed today")
    ex = executor(record)
    edited = await ex.run("lookup", {"city": "Paris"})
    assert edited.ok and edited.observation == edited.output == "Paris is closed today"
    assert (await ex.run("lookup", {"city": "Rome"})).observation == "live facts about Rome"
    assert record.claim("lookup", {"city": "Paris"}).edited
    failed = ToolRecording([RecordedTool(2, "lookup", {"city": "X"},
                                         tool_result("lookup", {}, "fine"))],
                           fork_at=2, edited_observation="Error: service down")
    assert not (await executor(failed).run("lookup", {"city": "X"})).ok


async def test_a_tool_the_user_may_no_longer_use_is_not_served_from_the_record():
    record = ToolRecording([RecordedTool(2, "lookup", {"city": "Paris"},
                                         tool_result("lookup", {}, "recorded"))])
    ex = executor(record, lookup=ToolPolicy(enabled=False))
    result = await ex.run("lookup", {"city": "Paris"})
    assert not result.ok and "disabled" in result.observation and record.served == []


async def test_a_recorded_approval_is_replayed_only_for_a_call_served_from_the_record():
    args = {"city": "Paris"}
    record = ToolRecording(
        [RecordedTool(3, "lookup", args, tool_result("lookup", args, "recorded"))],
        approvals=[RecordedApproval(2, "lookup", args, {"approved": True, "arguments": None,
                                                        "reason": "fine"}),
                   RecordedApproval(4, "lookup", {"city": "Rome"}, {"approved": True})])
    asked: list[Step] = []

    async def person(step: Step) -> Approval:  # the person watching the run
        asked.append(step)
        return Approval(False, reason="not today")

    approve = record.approver(person)
    approved = await approve(Step(kind="approval", name="lookup", input=args))
    assert approved.approved and approved.reason == "fine" and asked == []
    # Rome has a recorded approval but no recorded result: it would run live, so a person
    # decides (without one, nobody approves it).
    rome = Step(kind="approval", name="lookup", input={"city": "Rome"})
    assert (await approve(rome)).reason == "not today" and asked == [rome]
    unwatched = await record.approver()(rome)
    assert not unwatched.approved and "no approver" in unwatched.reason
