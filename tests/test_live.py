"""RunControl (agentlab/runs/control.py): pause, step, breakpoints, edits, approvals, cancel.

No database and no socket: ReAct runs through the real runtime on a scripted model
(tests/scripted_model.py — right for control flow, it says nothing about a real model), with the
control's hooks plugged into the RunContext as runner.launch plugs them, and a publisher that
keeps what would go to the browser.
"""

from __future__ import annotations

import asyncio

import pytest

from agentlab.paradigms.react import ReAct
from agentlab.paradigms.registry import validate_params
from agentlab.runs.control import ControlError, DebugSettings, RunControl
from agentlab.runtime.loop import execute
from agentlab.runtime.sinks import TeeSink
from agentlab.tools.decorator import tool
from agentlab.tools.executor import ToolPolicy
from tests.scripted_model import ScriptedModel, call, make_context, reply
from tests.waiting import await_until, turns


@tool
def population(city: str) -> str:
    """Look up the population of a city."""
    return {"paris": "Paris has 2.1 million people.", "lyon": "Lyon has 0.5 million people."}.get(
        city.lower(), "No results")


class Published:
    def __init__(self) -> None:
        self.statuses: list[tuple[str, dict]] = []
        self.approvals: list = []

    async def status(self, status: str, detail: dict) -> None:
        self.statuses.append((status, detail))

    async def approval(self, step, expires_at=None) -> None:
        self.approvals.append(step)


SCRIPT = [reply("", call("population", {"city": "Paris"})), reply("2.1 million")]


def start(script=SCRIPT, *, settings=None, approval=False, reflector="none"):
    published = Published()
    holder: dict = {}
    control = RunControl(1, publisher=published, settings=settings or DebugSettings(),
                         cancel_run=lambda _id: holder["ctx"].cancel() or True)
    policies = {"population": ToolPolicy(needs_approval=True)} if approval else None
    model = ScriptedModel(script)
    ctx, sink = make_context(model, [population], policies=policies,
                             params=validate_params("react", {"mode": "function_calling",
                                                              "reflector": reflector}),
                             checkpoint=control.checkpoint, approver=control.approve)
    ctx.sink = TeeSink(sink, control)
    holder["ctx"] = ctx
    task = asyncio.create_task(execute(ReAct(), ctx, "How many people live in Paris?"))
    return control, task, sink, model, published


async def paused(control: RunControl, task: asyncio.Task, *, not_at: int | None = None,
                 or_end: bool = False) -> None:
    """Until the run waits at a checkpoint other than `not_at` (the one it was just told to
    leave, which it drops only once it runs again) — or, with `or_end`, has ended."""
    def pauses_elsewhere() -> bool:
        return any(seq != not_at for seq in control.pauses)

    await await_until(lambda: task.done() or pauses_elsewhere(), message="the run pauses")
    if not (or_end and task.done()):
        assert pauses_elsewhere(), "the run did not pause"


async def test_without_settings_nothing_pauses():
    control, task, sink, _, published = start()
    outcome = await task
    assert outcome.status == "succeeded" and published.statuses == []


async def test_step_mode_pauses_before_each_llm_and_tool_call():
    control, task, sink, _, published = start(settings=DebugSettings(step_mode=True))
    kinds, seq = [], None
    while True:
        await paused(control, task, not_at=seq, or_end=True)
        if task.done():
            break
        seq = min(control.pauses)
        pending = control.detail()["pending"]
        kinds.append(pending["kind"])
        assert control.detail()["reason"].startswith("step mode: before the")
        await control.act({"action": "resume"})
    assert kinds == ["llm", "tool", "llm"]
    assert (await task).status == "succeeded"
    assert [s for s, _ in published.statuses] == ["paused", "running"] * 3


async def test_edited_tool_arguments_are_what_runs_and_what_the_trace_shows():
    control, task, sink, model, published = start(
        settings=DebugSettings(break_tools=frozenset({"population"})))
    await paused(control, task)
    (seq,) = control.pauses
    assert control.detail()["pending"]["input"] == {"city": "Paris"}
    await control.act({"action": "edit", "seq": seq, "input": {"city": "Lyon"}})
    assert published.statuses[-1][1]["pending"]["input"] == {"city": "Lyon"}
    await control.act({"action": "resume"})
    await task
    tool_step = sink.of_kind("tool")[0]
    assert tool_step.input == {"city": "Lyon"} and tool_step.meta["edited"]
    assert "Lyon has 0.5 million" in tool_step.text
    assert "Lyon has 0.5 million" in str(model.requests[1]["messages"])


async def test_an_edited_llm_request_is_sent_to_the_model():
    control, task, sink, model, _ = start(settings=DebugSettings(step_mode=True))
    await paused(control, task)
    (seq,) = control.pauses
    messages = control.detail()["pending"]["input"]["messages"]
    edited = [*messages[:-1], {"role": "user", "content": "How many people live in Lyon?"}]
    await control.act({"action": "edit", "seq": seq, "input": {"messages": edited}})
    with pytest.raises(ControlError, match="no field colour"):
        await control.act({"action": "edit", "seq": seq, "input": {"colour": "red"}})
    control.settings = DebugSettings()
    await control.act({"action": "resume"})
    await task
    assert model.requests[0]["messages"][-1]["content"] == "How many people live in Lyon?"


async def test_step_goes_to_the_next_checkpoint_and_pause_stops_at_one():
    control, task, _, _, _ = start(settings=DebugSettings(step_mode=True))
    await paused(control, task)
    control.settings = DebugSettings()  # step mode off: only "step" pauses again
    (first,) = control.pauses
    await control.act({"action": "step"})
    await paused(control, task, not_at=first)
    assert control.detail()["pending"]["kind"] == "tool"
    assert control.detail()["reason"].startswith("stepped")
    await control.act({"action": "resume"})
    assert (await task).status == "succeeded"
    control2, task2, _, _, _ = start()
    await control2.act({"action": "pause"})
    await paused(control2, task2)
    assert control2.detail()["reason"] == "paused by the user"
    await control2.act({"action": "resume"})
    await task2


async def test_breakpoints_after_an_error_and_after_a_reflection_say_why():
    script = [reply("", call("nope", {})), reply("", call("population", {"city": "Paris"})),
              reply("done")]
    control, task, _, _, _ = start(script, settings=DebugSettings(break_on_error=True))
    await paused(control, task)
    assert "failed" in control.detail()["reason"] and control.detail()["pending"]["kind"] == "llm"
    await control.act({"action": "resume"})
    await task
    control, task, _, _, _ = start(reflector="rule",
                                   settings=DebugSettings(break_on_reflection=True))
    await paused(control, task)
    assert control.detail()["reason"].startswith("breakpoint: reflection at step")
    await control.act({"action": "resume"})
    await task


async def test_approval_waits_then_runs_with_edited_arguments():
    control, task, sink, _, published = start(approval=True)
    await paused(control, task)
    (seq,) = control.pauses
    assert published.approvals[0].name == "population"
    status, detail = published.statuses[-1]
    assert status == "paused" and detail["waiting_for"] == "approval"
    await turns()  # everything the run can do without a person: it keeps waiting
    assert not task.done() and control.approvals()[0].seq == seq
    with pytest.raises(ControlError, match="not paused"):
        await control.act({"action": "resume"})
    await control.act({"action": "approve", "seq": seq, "arguments": {"city": "Lyon"}})
    await task
    assert sink.of_kind("approval")[0].output["approved"]
    assert sink.of_kind("tool")[0].input == {"city": "Lyon"}


async def test_deny_gives_the_model_the_reason():
    control, task, sink, model, _ = start(approval=True)
    await paused(control, task)
    (seq,) = control.pauses
    await control.act({"action": "deny", "seq": seq, "reason": "not today"})
    await task
    assert "denied this call: not today" in sink.of_kind("tool")[0].text


async def test_cancel_while_paused_ends_the_run_cancelled():
    control, task, sink, _, _ = start(settings=DebugSettings(step_mode=True))
    await paused(control, task)
    await control.act({"action": "cancel"})
    outcome = await task
    assert outcome.status == "cancelled" and not control.pauses
    assert sink.kinds()[-1] == "final"


async def test_a_step_cancelled_at_its_checkpoint_does_not_stay_running():
    control, task, sink, _, published = start(settings=DebugSettings(step_mode=True))
    await paused(control, task)
    (seq,) = control.pauses
    await control.act({"action": "cancel"})
    outcome = await task
    assert outcome.status == "cancelled" and sink.statuses[-1][0] == "cancelled"
    assert all(s.status != "running" for s in sink.steps)
    cut = next(s for s in sink.steps if s.seq == seq)  # the llm call it was about to make
    assert cut.status == "error" and sink.kinds()[-1] == "final"


@pytest.mark.parametrize(("frame", "message"), [
    ({"action": "edit", "seq": 99, "input": {}}, "step 99 is not waiting"),
    ({"action": "approve", "seq": 1}, "step 1 is not waiting for an approval"),
    ({"action": "debug", "step_mode": "yes"}, '"step_mode" must be true or false'),
    ({"action": "debug", "break_tools": "calculator"}, '"break_tools" must be a list'),
    ({"action": "resume"}, "the run is not paused"),
])
async def test_controls_that_cannot_apply_say_why(frame, message):
    control = RunControl(1, publisher=Published(), cancel_run=lambda _id: False)
    with pytest.raises(ControlError, match=message):
        await control.act(frame)


async def test_cancel_of_a_run_not_running_here_is_refused():
    control = RunControl(1, publisher=Published(), cancel_run=lambda _id: False)
    with pytest.raises(ControlError, match="the run is not active"):
        await control.act({"action": "cancel"})
