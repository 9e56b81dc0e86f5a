"""Replay rules a user relies on without seeing them (pure: the real runtime, ReAct, a
ScriptedModel as the live side, tool recordings as the database would hand them over):

- a recorded approval stands only for a call that is served from the record; a call that will
  run live (past the fork, or with arguments the record has no result for) waits for a person;
- a request that differs only in `response_format` or `stop` is a divergence, not a match;
- a reply served from the record costs nothing in the run's totals (its tokens still count).
"""

from __future__ import annotations

import asyncio
import json

from agentlab.forks.recorded_tools import (
    RecordedApproval,
    RecordedExecutor,
    RecordedTool,
    ToolRecording,
)
from agentlab.llm.replay import RecordedCall, Recording, ReplayModel
from agentlab.paradigms.react import ReAct
from agentlab.paradigms.registry import validate_params
from agentlab.runtime.context import Approval
from agentlab.runtime.loop import execute
from agentlab.tools.decorator import tool
from agentlab.tools.executor import ToolExecutor, ToolPolicy
from tests.scripted_model import ScriptedModel, call, make_context, reply
from traces.schema import Step

EFFECTS: list[str] = []


@tool
def send_note(to: str) -> str:
    """Send a note (a side effect: it needs approval)."""
    EFFECTS.append(to)
    return f"sent to {to}"


def result(to: str) -> dict:
    text = f"sent to {to}"
    return {"tool": "send_note", "arguments": {"to": to}, "ok": True, "output": text,
            "observation": text, "error": None, "error_type": None, "truncated": False,
            "duration_ms": 1.0}


APPROVED = {"approved": True, "arguments": None, "reason": "recorded yes"}
POLICY = {"send_note": ToolPolicy(needs_approval=True)}


class Person:
    """Whoever watches the run: says no, and remembers being asked."""

    def __init__(self) -> None:
        self.asked: list[Step] = []

    async def __call__(self, step: Step) -> Approval:
        self.asked.append(step)
        return Approval(False, reason="the person said no")


async def run_with(record: ToolRecording, person: Person, to: str = "ann"):
    """ReAct calls send_note(to) once, then answers; tools and approvals follow `record`."""
    EFFECTS.clear()
    script = [reply("", call("send_note", {"to": to})), reply("done")]
    ctx, sink = make_context(ScriptedModel(script), [send_note], policies=POLICY,
                             params=validate_params("react", {"mode": "function_calling"}),
                             approver=record.approver(person))
    ctx.executor = RecordedExecutor(ctx.executor, record)
    outcome = await execute(ReAct(), ctx, "Send ann a note")
    return outcome, sink


async def test_a_recorded_approval_serves_a_call_served_from_the_record():
    record = ToolRecording([RecordedTool(3, "send_note", {"to": "ann"}, result("ann"))],
                           approvals=[RecordedApproval(2, "send_note", {"to": "ann"}, APPROVED)])
    person = Person()
    outcome, sink = await run_with(record, person)
    assert outcome.status == "succeeded"
    assert person.asked == [] and EFFECTS == []  # served: nothing ran, nobody was needed
    assert sink.of_kind("approval")[0].output["approved"] is True
    assert record.served == [3]


async def test_a_fork_before_the_tool_step_does_not_reuse_its_approval_for_the_live_call():
    """Forked at the approval (step 2): the tool step (3) is past the fork, so the call runs
    live, and a live side effect needs a person, not the record's old decision."""
    record = ToolRecording([RecordedTool(3, "send_note", {"to": "ann"}, result("ann"))],
                           fork_at=2,
                           approvals=[RecordedApproval(2, "send_note", {"to": "ann"}, APPROVED)])
    person = Person()
    outcome, sink = await run_with(record, person)
    assert [s.name for s in person.asked] == ["send_note"]
    assert EFFECTS == []  # the person said no: nothing was sent
    tool_step = sink.of_kind("tool")[0]
    assert tool_step.status == "error" and "the person said no" in tool_step.text


async def test_an_approval_with_edited_arguments_the_record_has_no_result_for_asks_a_person():
    """The recorded person approved *other* arguments (bob) than those the record served (ann
    was never sent): approving again from the record would send to bob live."""
    decision = {"approved": True, "arguments": {"to": "bob"}, "reason": "to bob instead"}
    record = ToolRecording([RecordedTool(3, "send_note", {"to": "ann"}, result("ann"))],
                           approvals=[RecordedApproval(2, "send_note", {"to": "ann"}, decision)])
    person = Person()
    await run_with(record, person)
    assert len(person.asked) == 1 and EFFECTS == []


async def test_without_a_watcher_a_live_call_with_a_recorded_approval_is_denied():
    record = ToolRecording([], approvals=[RecordedApproval(2, "send_note", {"to": "ann"},
                                                           APPROVED)])
    decision = await record.approver()(Step(kind="approval", name="send_note",
                                            input={"to": "ann"}))
    assert not decision.approved and "no approver" in decision.reason
    assert record.approvals, "a decision not used stays for a later served call"


# ------------------------------------------------------------------ divergence fields


def request(**extra) -> dict:
    return {"messages": [{"role": "user", "content": "hi"}], "tools": None, "tool_choice": None,
            "response_format": None, "stop": None, **extra}


def recorded(seq: int, req: dict, text: str, cost: float = 0.0) -> RecordedCall:
    return RecordedCall(seq, json.loads(json.dumps(req)), reply(text, cost_usd=cost).to_dict())


async def ask(model: ReplayModel, req: dict):
    return await model.chat(req["messages"], tools=req["tools"],
                            tool_choice=req["tool_choice"],
                            response_format=req["response_format"], stop=req["stop"])


async def test_a_changed_response_format_alone_is_a_divergence():
    schema = {"type": "json_object"}
    live = ScriptedModel(["live"])
    model = ReplayModel([recorded(1, request(response_format=schema), "recorded")], live)
    answer = await ask(model, request(response_format={"type": "text"}))
    assert answer.text == "live" and len(live.requests) == 1
    assert model.recording.first_divergence.fields == ("response_format",)
    # And the same response_format is served.
    same = ReplayModel([recorded(1, request(response_format=schema), "recorded")])
    assert (await ask(same, request(response_format=dict(schema)))).text == "recorded"


async def test_a_changed_stop_alone_is_a_divergence():
    live = ScriptedModel(["live"])
    model = ReplayModel([recorded(1, request(stop=["Observation:"]), "recorded")], live)
    answer = await ask(model, request(stop=["\nObservation"]))
    assert answer.text == "live"
    assert model.recording.first_divergence.fields == ("stop",)
    dropped = ReplayModel([recorded(1, request(stop=["Observation:"]), "recorded")],
                          ScriptedModel(["live"]))
    assert (await ask(dropped, request())).text == "live"  # no stop at all: differs too
    assert dropped.recording.first_divergence.fields == ("stop",)


# ------------------------------------------------------------------ cost of served replies


async def test_replies_served_from_the_record_cost_nothing_but_keep_their_tokens():
    """The recorded run paid for its replies; a replay of it pays nothing for them."""
    script = [reply("", call("send_note", {"to": "ann"}), cost_usd=0.25, prompt_tokens=40),
              reply("done", cost_usd=0.5, prompt_tokens=60)]
    ctx, sink = make_context(ScriptedModel(script), [send_note],
                             params=validate_params("react", {"mode": "function_calling"}))
    first = await execute(ReAct(), ctx, "Send ann a note")
    assert ctx.totals.cost_usd == 0.75  # the recorded run's cost, so the replay's 0 means it

    calls = [RecordedCall(s.seq, json.loads(json.dumps(s.input)), s.output)
             for s in sink.steps if s.kind == "llm"]
    tools = [RecordedTool(s.seq, s.name, s.input, s.output) for s in sink.steps
             if s.kind == "tool"]
    ctx2, sink2 = make_context(ReplayModel(Recording(calls), ScriptedModel([])), [send_note],
                               params=validate_params("react", {"mode": "function_calling"}))
    ctx2.executor = RecordedExecutor(ToolExecutor({"send_note": send_note}), ToolRecording(tools))
    second = await execute(ReAct(), ctx2, "Send ann a note")
    assert second.answer == first.answer == "done"
    assert ctx2.totals.cost_usd == 0.0
    assert all(s.cost_usd == 0.0 for s in sink2.of_kind("llm"))
    assert (ctx2.totals.tokens_in, ctx2.totals.tokens_out) == (
        ctx.totals.tokens_in, ctx.totals.tokens_out)


async def test_a_run_taken_over_keeps_the_cost_of_its_own_recorded_replies():
    """A takeover re-reads the calls the run itself paid for (Recording(paid=True)): their cost
    stays in its totals; a replay of another run's calls pays nothing for them."""
    calls = [recorded(1, request(), "once", cost=0.25)]
    own = ReplayModel(Recording(calls, paid=True))
    assert (await ask(own, request())).cost_usd == 0.25
    replayed = ReplayModel(Recording(calls))
    assert (await ask(replayed, request())).cost_usd == 0.0


# ------------------------------------------------------------------ what a record serves
# (each found by mutation testing: scripts/mutate agentlab/forks/recorded_tools.py)


def recording_of(*tos: str, **options) -> ToolRecording:
    return ToolRecording([RecordedTool(i + 2, "send_note", {"to": to}, result(to))
                          for i, to in enumerate(tos)], **options)


async def test_an_edited_observation_is_an_ok_result_or_an_error_as_the_user_wrote_it():
    recorded = {**result("ann"), "ok": False, "error": "smtp down", "error_type": "exception",
                "truncated": True}
    for text, ok in [("Sent, ann replied.", True), ("  Error: ann moved away", False)]:
        record = ToolRecording([RecordedTool(2, "send_note", {"to": "ann"}, recorded)],
                               fork_at=2, edited_observation=text)
        served = record.take("send_note", {"to": "ann"})
        assert (served.ok, served.output, served.observation) == (ok, text, text)
        assert (served.error, served.error_type) == ((None, None) if ok else (text, "edited"))
        assert served.truncated is False  # the user's text is whole
        assert record.claim("send_note", {"to": "ann"}).edited


async def test_a_fork_without_an_edit_serves_its_own_step_as_recorded():
    record = recording_of("ann", fork_at=2)
    served = record.take("send_note", {"to": "ann"})
    assert served.observation == "sent to ann" and served.ok
    assert record.claim("send_note", {"to": "ann"}).edited is False
    assert record.claim("send_note", {"to": "ann"}) is None  # each served call claimed once
    assert record.claim("send_note", {"to": "zed"}) is None  # never served: nothing to claim


async def test_only_the_next_few_recorded_calls_are_matched():
    """A call is matched among the next WINDOW (8) pending ones, not anywhere in the run."""
    record = recording_of(*[f"p{i}" for i in range(9)])
    assert record.take("send_note", {"to": "p8"}) is None  # ninth: outside the window
    assert record.take("send_note", {"to": "p7"}).observation == "sent to p7"


async def test_the_executor_serves_what_the_users_groups_allow_and_counts_live_calls():
    policy = {"send_note": ToolPolicy(allowed_groups=frozenset({"mail"}))}
    EFFECTS.clear()
    for inner in (ToolExecutor({"send_note": send_note}, policy, user_groups={"mail"}),
                  ToolExecutor({"send_note": send_note}, policy, is_superuser=True)):
        ex = RecordedExecutor(inner, recording_of("ann"))
        assert (await ex.run("send_note", {"to": "ann"})).observation == "sent to ann"
        assert EFFECTS == []  # served, not sent
    ex = RecordedExecutor(ToolExecutor({"send_note": send_note}), recording_of())
    await ex.run("send_note", {"to": "bob"})
    await ex.run("send_note", {"to": "cy"})
    assert ex.recording.live_calls == 2 and EFFECTS == ["bob", "cy"]


async def test_a_live_call_keeps_the_runs_tool_timeout():
    @tool
    async def hangs() -> str:
        """Never answers."""
        await asyncio.Event().wait()
        return "never"

    ex = RecordedExecutor(ToolExecutor({"hangs": hangs}), ToolRecording([]))
    out = await asyncio.wait_for(ex.run("hangs", {}, timeout_s=0.1), 10)
    assert out.error == "tool hangs timed out after 0.1 s"


async def test_a_recorded_decision_carries_its_arguments_and_no_invented_reason():
    """The person approved bob instead of ann, and the record holds bob's result: the
    replay approves bob (served, not sent), with the recorded (empty) reason."""
    record = ToolRecording([RecordedTool(3, "send_note", {"to": "bob"}, result("bob"))],
                           approvals=[RecordedApproval(2, "send_note", {"to": "ann"},
                                                       {"approved": True,
                                                        "arguments": {"to": "bob"}})])
    decision = await record.approver(Person())(Step(kind="approval", name="send_note",
                                                    input={"to": "ann"}))
    assert decision.approved and decision.arguments == {"to": "bob"} and decision.reason == ""


# ------------------------------------------------------------------ the replay model's edges
# (found by mutation testing: scripts/mutate agentlab/llm/replay.py)


async def test_a_request_off_the_record_goes_live_exactly_as_asked_and_is_counted():
    live = ScriptedModel(["live one", "live two"])
    model = ReplayModel([], live)
    heard: list[str] = []

    async def on_token(piece: str) -> None:
        heard.append(piece)

    tools = [{"type": "function", "function": {"name": "send_note"}}]
    asked = {"tools": tools, "tool_choice": "auto", "response_format": {"type": "json_object"},
             "stop": ["\nObservation"], "temperature": 0.3, "max_tokens": 77}
    messages = [{"role": "user", "content": "hi"}]
    assert (await model.chat(messages, on_token=on_token, **asked)).text == "live one"
    assert live.requests[0] == {"messages": messages, **asked}
    assert "".join(heard) == "live one"
    await model.chat(messages)
    assert model.recording.live_calls == 2


async def test_a_served_reply_is_streamed_to_the_page_at_once():
    model = ReplayModel([recorded(1, request(), "from the record")])
    heard: list[str] = []
    await model.chat(request()["messages"], on_token=heard.append)
    assert heard == ["from the record"]
    claimed = model.recording.claim(request())
    assert (claimed.kind, claimed.source_seq) == ("replayed", 1)


async def test_every_role_replays_on_its_own_live_model_window_and_name_unless_offline():
    from agentlab.llm.replay import ReplayMismatch, replay_models
    from agentlab.llm.types import ContextWindow

    planner = ScriptedModel(["live plan"], profile_name="planner-profile")
    planner.window = ContextWindow(4096, 256)
    models = replay_models({"planner": planner}, Recording([]))
    assert models["planner"].profile_name == "planner-profile"
    assert models["planner"].window == ContextWindow(4096, 256)
    assert (await ask(models["planner"], request())).text == "live plan"
    offline = replay_models({"planner": planner}, Recording([]), live=False)
    assert offline["planner"].profile_name == "planner-profile"  # without a live model too
    assert offline["planner"].window == ContextWindow(4096, 256)
    try:
        await ask(offline["planner"], request())
    except ReplayMismatch as exc:
        assert str(exc) == ("the recording has no reply for this request: "
                            "the recorded run made no more LLM calls")
    else:
        raise AssertionError("an offline replay went live")


async def test_requests_match_whatever_the_order_of_their_keys_and_say_what_differs():
    from agentlab.llm.replay import differences

    schema = {"type": "function", "function": {"name": "f", "parameters": {"a": 1, "b": 2}}}
    reordered = {"function": {"parameters": {"b": 2, "a": 1}, "name": "f"}, "type": "function"}
    model = ReplayModel([recorded(1, request(tools=[schema]), "served")])
    assert (await ask(model, request(tools=[reordered]))).text == "served"
    longer = request()
    longer["messages"] = [*longer["messages"], {"role": "assistant", "content": "more"}]
    assert differences(longer, request()).detail == (
        "the request has 2 messages, the recorded one 1")
    roleless = {**request(), "messages": [{"content": "x"}]}
    assert differences(roleless, request()).detail == (
        "message 1 (?) differs from the recorded request")


def test_a_recorded_reply_reads_back_with_its_tool_calls_and_usage_as_they_were():
    from agentlab.llm.replay import result_from_dict

    result = result_from_dict({"text": None, "tool_calls": [
        {"id": "c1", "name": "f", "arguments": "not a dict", "raw_arguments": "{bad",
         "error": "unreadable arguments"}, {"arguments": None}]})
    first, second = result.tool_calls
    assert (first.arguments, first.raw_arguments, first.error) == (
        None, "{bad", "unreadable arguments")
    assert (second.name, second.id, second.raw_arguments) == ("", "call_1", "{}")
    assert (result.text, result.usage.prompt_tokens, result.usage.completion_tokens) == ("", 0, 0)


async def test_the_same_stop_and_tool_choice_are_served_and_a_fork_past_its_step_says_so():
    from agentlab.llm.replay import Divergence, ReplayMismatch

    for extra in ({"stop": ["Observation:"]}, {"tool_choice": "auto"}):
        model = ReplayModel([recorded(1, request(**extra), "served")])
        assert (await ask(model, request(**extra))).text == "served", extra
    offline = ReplayModel([recorded(1, request(), "one")], fork_at=1)
    assert (offline.profile_name, offline.window) == ("replay", None)
    await ask(offline, request())
    try:
        await ask(offline, request(stop=["x"]))
    except ReplayMismatch as exc:
        assert str(exc) == "the recording has no reply for this request: past the fork"
    else:
        raise AssertionError("a fork past its step went on without a live model")
    assert Divergence(4, ("stop", "tools"), "differs").to_dict() == {
        "source_seq": 4, "fields": ["stop", "tools"], "detail": "differs"}


async def test_a_replay_model_takes_its_name_and_window_from_its_live_model():
    from agentlab.llm.types import ContextWindow

    live = ScriptedModel([], profile_name="live-profile")
    live.window = ContextWindow(2048, 128)
    model = ReplayModel([recorded(1, request(), "served")], live)
    assert (model.profile_name, model.window) == ("live-profile", ContextWindow(2048, 128))
    heard: list[str] = []

    async def on_token(piece: str) -> None:  # the page's callback is a coroutine
        heard.append(piece)

    await model.chat(request()["messages"], on_token=on_token)
    assert heard == ["served"]
    assert model.recording.claim(request(stop=["never asked"])) is None
