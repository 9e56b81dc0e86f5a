"""What the run context records when it answers, refuses or interrupts a call itself.

These steps are what a person reads in the trace (and the run page's pills read their meta:
`repeat_of`, `denied`, `loop`, `interrupted`, `refused`), and their text is what the model
reads next. Each test pins the whole step, not a field or two. The model is tests/
scripted_model.py's (this is the runtime's control flow, no server needed) or, for the context
window, the scripted OpenAI-compatible server (tests/fake_openai.py).
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from agentlab.runtime.context import Approval
from agentlab.runtime.limits import Limits
from agentlab.tools.decorator import tool
from agentlab.tools.executor import ToolPolicy
from tests.runtime_pieces import lookup, nap
from tests.scripted_model import ScriptedModel, make_context, reply
from tests.waiting import await_until
from traces.schema import Step

APPROVAL = {"lookup": ToolPolicy(needs_approval=True)}


def fields(step: Step, *names: str) -> dict:
    return {name: getattr(step, name) for name in names}


def result_dict(**values) -> dict:
    return {"tool": "lookup", "error": None, "error_type": None, "truncated": False,
            "duration_ms": 0.0, **values}


async def test_a_repeated_call_is_answered_from_its_earlier_result_with_a_note() -> None:
    ctx, sink = make_context(ScriptedModel([]), [lookup], limits=Limits(max_repeats=5))
    await ctx.emit(Step(kind="plan", text="the plan"))
    first = await ctx.tool("lookup", {"city": "Paris"}, parent=1, role="executor")
    again = await ctx.tool("lookup", {"city": " Paris "}, parent=1, role="executor")
    note = ("Paris has 2.1 million people.\n\nNote: you already called lookup with these "
            "arguments and this was its result; it will not change. Use it to answer, or call "
            "another tool.")
    assert dataclasses.asdict(again) == result_dict(
        arguments={"city": " Paris "}, ok=True, output="Paris has 2.1 million people.",
        observation=note)
    tool_steps = sink.of_kind("tool")
    assert len(tool_steps) == 2 and ctx.totals.tool_calls == 1  # not run again
    repeat = tool_steps[1]
    assert fields(repeat, "seq", "parent", "role", "name", "input", "status", "text",
                  "duration_ms", "meta") == {
        "seq": 3, "parent": 1, "role": "executor", "name": "lookup",
        "input": {"city": " Paris "}, "status": "ok", "text": note, "duration_ms": 0.0,
        "meta": {"repeat_of": tool_steps[0].seq}}
    assert repeat.output == dataclasses.asdict(again)
    assert first.ok and ctx.findings == [first.observation]  # the note is not a new finding


async def test_a_repeated_call_that_failed_for_good_gets_its_error_again_with_a_note() -> None:
    # Wrong arguments fail the same way every time: not run again; the model is told so.
    ctx, sink = make_context(ScriptedModel([]), [lookup], limits=Limits(max_repeats=5))
    first = await ctx.tool("lookup", {"town": "Paris"})
    again = await ctx.tool("lookup", {"town": "Paris"})
    assert not first.ok and first.error_type == "validation"
    note = (f"{first.observation}\n\nNote: you already called lookup with these arguments and "
            "this was its error; the same call fails again. Change the arguments, or call "
            "another tool.")
    assert dataclasses.asdict(again) == {**dataclasses.asdict(first), "observation": note,
                                         "duration_ms": 0.0}
    tool_steps = sink.of_kind("tool")
    assert ctx.totals.tool_calls == 1 and ctx.findings == []
    assert fields(tool_steps[1], "status", "text", "meta") == {
        "status": "error", "text": note, "meta": {"repeat_of": tool_steps[0].seq}}


async def test_a_call_that_timed_out_runs_again() -> None:
    ctx, sink = make_context(ScriptedModel([]), [nap],
                             limits=Limits(max_repeats=5, tool_timeout_s=0.05))
    for _ in range(2):
        assert (await ctx.tool("nap", {"seconds": 1})).error_type == "timeout"
    assert [s.meta.get("repeat_of") for s in sink.of_kind("tool")] == [None, None]
    assert ctx.totals.tool_calls == 2


async def test_an_earlier_result_is_reused_only_for_a_call_that_is_free() -> None:

    async def yes(step: Step) -> Approval:
        return Approval(True)

    ctx, sink = make_context(ScriptedModel([]), [lookup], policies=APPROVAL, approver=yes,
                             limits=Limits(max_repeats=5))
    await ctx.tool("lookup", {"city": "Paris"})
    await ctx.tool("lookup", {"city": "Paris"})  # needs a person each time: run again
    assert [s.kind for s in sink.steps] == ["approval", "tool", "approval", "tool"]
    assert ctx.totals.tool_calls == 2


async def test_an_approval_step_says_who_decided_what_with_which_arguments() -> None:
    decided: list[Step] = []

    async def person(step: Step) -> Approval:
        decided.append(step)
        return Approval(True, arguments={"city": "paris"}, reason="checked the city")

    ctx, sink = make_context(ScriptedModel([]), [lookup], policies=APPROVAL, approver=person)
    await ctx.emit(Step(kind="plan", text="the plan"))
    result = await ctx.tool("lookup", {"city": "Lyon"}, parent=1, role="executor")
    approval, call = sink.of_kind("approval")[0], sink.of_kind("tool")[0]
    assert decided == [approval]
    assert fields(approval, "seq", "parent", "role", "name", "input", "status", "text",
                  "meta", "output") == {
        "seq": 2, "parent": 1, "role": "executor", "name": "lookup", "input": {"city": "Lyon"},
        "status": "ok", "text": "approved",
        "meta": {"approved": True, "reason": "checked the city"},
        "output": {"approved": True, "arguments": {"city": "paris"},
                   "reason": "checked the city"}}
    assert approval.duration_ms is not None and approval.duration_ms >= 0
    assert (call.input, call.parent, call.role, result.ok) == ({"city": "paris"}, 1,
                                                               "executor", True)


@pytest.mark.parametrize(("reason", "said"), [
    ("not on a Sunday", "not on a Sunday"), ("", "denied")])
async def test_a_denied_call_is_a_failed_tool_step_saying_why(reason, said) -> None:
    async def person(step: Step) -> Approval:
        return Approval(False, reason=reason)

    ctx, sink = make_context(ScriptedModel([]), [lookup], policies=APPROVAL, approver=person)
    await ctx.emit(Step(kind="plan", text="the plan"))
    result = await ctx.tool("lookup", {"city": "Paris"}, parent=1, role="executor")
    observation = f"Error: the user denied this call: {said}"
    assert dataclasses.asdict(result) == result_dict(
        arguments={"city": "Paris"}, ok=False, output="", observation=observation,
        error=observation, error_type="denied")
    _plan, approval, call = sink.steps
    assert (approval.text, approval.meta) == (f"denied: {reason}",
                                              {"approved": False, "reason": reason})
    assert approval.output == {"approved": False, "arguments": None, "reason": reason}
    assert fields(call, "kind", "role", "name", "parent", "input", "status", "text",
                  "duration_ms", "meta") == {
        "kind": "tool", "role": "executor", "name": "lookup", "parent": 1,
        "input": {"city": "Paris"}, "status": "error", "text": observation, "duration_ms": 0.0,
        "meta": {"denied": True}}
    assert call.output == dataclasses.asdict(result) and ctx.totals.tool_calls == 0


async def test_arguments_edited_after_an_approval_are_approved_again_or_refused() -> None:
    asked: list[dict] = []

    async def person(step: Step) -> Approval:
        asked.append(dict(step.input))
        return Approval(len(asked) == 1, reason="" if len(asked) == 1 else "not that city")

    async def checkpoint(step: Step) -> dict | None:  # a person edits the approved call
        return {"city": "Rome"} if step.kind == "tool" else None

    ctx, sink = make_context(ScriptedModel([]), [lookup], policies=APPROVAL, approver=person,
                             checkpoint=checkpoint)
    await ctx.emit(Step(kind="plan", text="the plan"))
    result = await ctx.tool("lookup", {"city": "Paris"}, parent=1, role="executor")
    assert asked == [{"city": "Paris"}, {"city": "Rome"}]
    again = sink.of_kind("approval")[1]
    assert fields(again, "name", "parent", "role", "input") == {
        "name": "lookup", "parent": 1, "role": "executor", "input": {"city": "Rome"}}
    observation = "Error: the user denied this call: not that city"
    assert dataclasses.asdict(result) == result_dict(
        arguments={"city": "Rome"}, ok=False, output="", observation=observation,
        error=observation, error_type="denied")
    assert [s.kind for s in sink.steps] == ["plan", "approval", "tool", "approval"]
    call = sink.of_kind("tool")[0]
    assert fields(call, "input", "status", "text", "duration_ms", "meta") == {
        "input": {"city": "Rome"}, "status": "error", "text": observation, "duration_ms": 0.0,
        "meta": {"edited": True, "denied": True}}
    assert call.output == dataclasses.asdict(result) and ctx.totals.tool_calls == 0
    # Each version of the step went out; the last one is the refusal.
    assert [e.status for e in sink.events if e.seq == call.seq] == ["running", "error"]


async def test_the_second_approval_may_change_the_edited_arguments_once_more() -> None:
    async def person(step: Step) -> Approval:
        if step.input == {"city": "Rome"}:
            return Approval(True, arguments={"city": "Paris"})  # not Rome: Paris
        return Approval(True)

    async def checkpoint(step: Step) -> dict | None:
        return {"city": "Rome"} if step.kind == "tool" else None

    ctx, sink = make_context(ScriptedModel([]), [lookup], policies=APPROVAL, approver=person,
                             checkpoint=checkpoint)
    result = await ctx.tool("lookup", {"city": "Lyon"})
    assert result.ok and "2.1 million" in result.observation
    assert sink.of_kind("tool")[0].input == {"city": "Paris"}


async def test_the_same_tool_with_other_arguments_is_no_loop() -> None:
    ctx, sink = make_context(ScriptedModel([]), [lookup], limits=Limits(max_repeats=2))
    for city in ("Rome", "Paris", "Rome"):
        await ctx.tool("lookup", {"city": city})
    assert [s.status for s in sink.of_kind("tool")] == ["ok", "ok", "ok"]


async def test_arguments_edited_to_what_was_approved_are_not_asked_again() -> None:
    asked: list[dict] = []

    async def person(step: Step) -> Approval:
        asked.append(dict(step.input))
        return Approval(True)

    async def checkpoint(step: Step) -> dict | None:
        return {"city": " Paris"} if step.kind == "tool" else None  # the same, normalised

    ctx, sink = make_context(ScriptedModel([]), [lookup], policies=APPROVAL, approver=person,
                             checkpoint=checkpoint)
    assert (await ctx.tool("lookup", {"city": "Paris"})).ok
    assert asked == [{"city": "Paris"}]


async def test_a_call_the_loop_check_refuses_is_a_tool_step_with_the_nudge() -> None:
    ctx, sink = make_context(ScriptedModel([]), [lookup], limits=Limits(max_repeats=2))
    hooked: list[tuple] = []

    async def nudge(name, args, parent) -> str:
        hooked.append((name, args, parent))
        return f"Error: stop calling {name}"

    ctx.on_loop = nudge
    await ctx.emit(Step(kind="plan", text="the plan"))
    await ctx.tool("lookup", {"city": "Rome"}, parent=1)
    refused = await ctx.tool("lookup", {"city": "Rome"}, parent=1, role="executor")
    assert hooked == [("lookup", {"city": "Rome"}, 1)]
    assert dataclasses.asdict(refused) == result_dict(
        arguments={"city": "Rome"}, ok=False, output="", observation="Error: stop calling lookup",
        error="Error: stop calling lookup", error_type="loop")
    step = sink.steps[-1]
    assert fields(step, "kind", "role", "name", "parent", "input", "status", "text",
                  "duration_ms", "meta") == {
        "kind": "tool", "role": "executor", "name": "lookup", "parent": 1,
        "input": {"city": "Rome"}, "status": "error", "text": "Error: stop calling lookup",
        "duration_ms": 0.0, "meta": {"loop": True}}
    assert step.output == dataclasses.asdict(refused)


async def test_a_call_cut_off_is_closed_as_interrupted_with_its_duration() -> None:
    ctx, sink = make_context(ScriptedModel([]), [nap])
    call = asyncio.create_task(ctx.tool("nap", {"seconds": 30}, meta={"var": "#E1"}))
    await await_until(lambda: sink.of_kind("tool"), message="the call is under way")
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    (step,) = sink.of_kind("tool")
    assert fields(step, "status", "output", "meta") == {
        "status": "error", "output": {"error": "interrupted (cancelled or out of time)"},
        "meta": {"var": "#E1", "interrupted": True}}
    assert step.duration_ms is not None and 0 < step.duration_ms < 30_000


async def test_cancel_stops_the_paradigms_task_and_every_later_call() -> None:
    ctx, sink = make_context(ScriptedModel([reply("never")]), [nap])
    ctx._task = task = asyncio.create_task(ctx.tool("nap", {"seconds": 30}))
    await await_until(lambda: sink.of_kind("tool"), message="the call is under way")
    ctx.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ctx.cancelled
    from agentlab.runtime.limits import RunCancelled

    with pytest.raises(RunCancelled) as info:
        await ctx.llm("agent", [{"role": "user", "content": "hi"}])
    assert str(info.value) == "the run was cancelled"
    ctx.cancel()  # again, with the task done: nothing to cancel, no error


async def test_elapsed_time_counts_from_the_contexts_start() -> None:
    ctx, _ = make_context(ScriptedModel([]))
    first = ctx.elapsed_ms()
    await asyncio.sleep(0.05)  # the subject: time passing
    second = ctx.elapsed_ms()
    assert 0 <= first < second and second - first >= 45  # milliseconds, growing
    assert second < 60_000  # since the context was made, not since some other origin


# ---------------------------------------------------------------------- context windows


def _window_model(fake_llm, context_tokens: int = 1024, max_tokens: int = 128):
    from agentlab.llm.client import OpenAIChatModel
    from agentlab.llm.types import ProfileConfig

    return OpenAIChatModel(ProfileConfig(
        name="Small window", base_url=fake_llm.base_url, model="scripted-model", retries=0,
        context_tokens=context_tokens, max_tokens=max_tokens))


async def test_a_prompt_that_cannot_fit_is_an_llm_step_with_the_sizes(fake_llm) -> None:
    from agentlab.runtime.window import PromptTooLong

    ctx, sink = make_context(_window_model(fake_llm))
    await ctx.emit(Step(kind="plan", text="the plan"))
    messages = [{"role": "user", "content": "Summarise: " + "lorem ipsum " * 800}]
    with pytest.raises(PromptTooLong) as info:
        await ctx.llm("solver", messages, parent=1, max_tokens=100)
    (step,) = sink.of_kind("llm")
    assert fields(step, "seq", "parent", "role", "name", "status", "duration_ms") == {
        "seq": 2, "parent": 1, "role": "solver", "name": "Small window", "status": "error",
        "duration_ms": 0.0}
    assert step.input["messages"] == messages and step.input["max_tokens"] == 100
    assert step.output == {"error": str(info.value), "kind": "context_too_long"}
    assert step.text == str(info.value)
    assert step.meta == {"refused": {"estimated_tokens": info.value.estimated, "budget": 924,
                                     "context_tokens": 1024, "reserve": 100}}
    assert info.value.estimated > 924 and fake_llm.requests == []


SERVER_SAYS = ("This model's maximum context length is {limit} tokens. However, you requested "
               "{total} tokens ({prompt} in the messages, 0 in the completion).")


async def test_a_server_that_counts_more_is_believed_up_to_four_tokens_for_ours(fake_llm) -> None:
    from tests.fake_openai import Fail, Reply

    def long_messages():
        return [{"role": "user", "content": "Go."},
                {"role": "assistant", "content": "Reading."},
                {"role": "user", "content": "Observation: " + "cell " * 1500}]

    # The server claims 50 times our estimate: only 4 times is believed (no tokenizer makes
    # more), so the prompt is cut to about a quarter of the window, not to almost nothing.
    fake_llm.script(Fail(400, SERVER_SAYS.format(limit=4096, total=100000, prompt=100000),
                         "context_length_exceeded"), Reply(text="Done."))
    ctx, sink = make_context(_window_model(fake_llm, context_tokens=4096))
    messages = long_messages()
    assert (await ctx.llm("agent", messages)).text == "Done."
    sent = fake_llm.requests[1]["messages"]
    kept = len(sent[-1]["content"])
    # Fitted to 4 x our estimate: 1,590 characters of 7,513 (3 x would keep ~2,100, 5 x ~1,270).
    assert 1400 < kept < 1800
    (step,) = sink.steps
    assert step.meta["trimmed"]["server_prompt_tokens"] == 100000
    assert step.meta["trimmed"]["server_context_tokens"] == 4096


async def test_a_server_count_is_kept_with_five_percent_spare(fake_llm) -> None:
    from agentlab.runtime import window
    from tests.fake_openai import Fail, Reply

    messages = [{"role": "user", "content": "Go."}, {"role": "assistant", "content": "Reading."},
                {"role": "user", "content": "Observation: " + "cell " * 1500}]
    ours = sum(map(window.message_tokens, messages)) + window.fixed_tokens()
    fake_llm.script(Fail(400, SERVER_SAYS.format(limit=4096, total=2 * ours, prompt=2 * ours),
                         "context_length_exceeded"), Reply(text="Done."))
    ctx, _ = make_context(_window_model(fake_llm, context_tokens=4096))
    assert (await ctx.llm("agent", messages)).text == "Done."
    # What was sent is the prompt fitted as if every estimate were 2 x 1.05 of ours.
    expected = window.fit(messages, window.Budget.of(4096, 128), fixed=window.fixed_tokens(),
                          ratio=2 * 1.05, model="Small window").messages
    assert fake_llm.requests[1]["messages"] == expected
    assert expected != window.fit(messages, window.Budget.of(4096, 128),
                                  fixed=window.fixed_tokens(), ratio=2.0,
                                  model="Small window").messages  # the spare matters here


async def test_a_server_window_smaller_than_the_profiles_is_learnt(fake_llm) -> None:
    from tests.fake_openai import Fail, Reply

    messages = [{"role": "user", "content": "Go."}, {"role": "assistant", "content": "Reading."},
                {"role": "user", "content": "Observation: " + "cell " * 700}]
    # The profile says 4,096; the server's window is 1,024 and it counts as we do.
    fake_llm.script(Fail(400, SERVER_SAYS.format(limit=1024, total=1200, prompt=1200),
                         "context_length_exceeded"), Reply(text="Done."), Reply(text="Again."))
    ctx, sink = make_context(_window_model(fake_llm, context_tokens=4096))
    assert (await ctx.llm("agent", messages)).text == "Done."
    assert (await ctx.llm("agent", messages)).text == "Again."  # fitted at once this time
    second, third = fake_llm.requests[1]["messages"], fake_llm.requests[2]["messages"]
    assert second == third and len(second[-1]["content"]) < len(messages[-1]["content"])
    first_step, second_step = sink.steps
    assert first_step.meta["trimmed"]["server_context_tokens"] == 1024
    assert "server_context_tokens" not in second_step.meta["trimmed"]  # our own fit this time


async def test_a_server_count_that_changes_nothing_is_not_asked_again(fake_llm) -> None:
    from agentlab.llm.errors import ContextTooLong
    from tests.fake_openai import Fail

    # The server says "too long" but counts fewer tokens than our estimate and states no
    # window: nothing learnt would make the prompt shorter, so its error stands.
    fake_llm.script(Fail(400, "maximum context length exceeded", "context_length_exceeded"))
    ctx, sink = make_context(_window_model(fake_llm, context_tokens=4096))
    with pytest.raises(ContextTooLong):
        await ctx.llm("agent", [{"role": "user", "content": "Hi."}])
    assert len(fake_llm.requests) == 1 and sink.steps[0].status == "error"
    assert "trimmed" not in sink.steps[0].meta


class WindowedModel(ScriptedModel):
    """A scripted model whose profile states a context window (as OpenAIChatModel does), so
    the runtime fits prompts to it and learns from its "too long" errors."""

    def __init__(self, script, tokens: int = 4096, max_tokens: int | None = 128) -> None:
        from agentlab.llm.types import ContextWindow

        super().__init__(script)
        self.window = ContextWindow(tokens=tokens, max_tokens=max_tokens)


def too_long(prompt: int | None, limit: int | None):
    from agentlab.llm.errors import ContextTooLong

    error = ContextTooLong("the prompt is too long")
    error.prompt_tokens, error.limit_tokens = prompt, limit
    return error


def long_exchange(words: int = 1500) -> list[dict]:
    return [{"role": "user", "content": "Go."}, {"role": "assistant", "content": "Reading."},
            {"role": "user", "content": "Observation: " + "cell " * words}]


def fitted(messages, *, ratio: float = 1.0, tokens: int = 4096, tools=None,
           response_format=None) -> list[dict]:
    from agentlab.runtime import window

    return window.fit(messages, window.Budget.of(tokens, 128),
                      fixed=window.fixed_tokens(tools, response_format), ratio=ratio,
                      model="scripted-model").messages


LOOKUP_TOOLS = [{"type": "function", "function": {
    "name": "lookup", "description": "Look up the population of a city. " * 40,
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


ANSWER_FORMAT = {"type": "json_schema", "json_schema": {"name": "answer", "schema": {
    "type": "object", "properties": {f"field_{i}": {"type": "string"} for i in range(60)}}}}


@pytest.mark.parametrize(("tools", "response_format"), [
    (None, None), (LOOKUP_TOOLS, None), (None, ANSWER_FORMAT)])
async def test_a_servers_count_is_compared_with_our_whole_request(tools, response_format):
    """The server's count covers the tool schemas and the reply's schema too: so does the
    estimate it is set against."""
    from agentlab.runtime import window

    messages = long_exchange()
    ours = sum(map(window.message_tokens, messages)) + window.fixed_tokens(tools,
                                                                          response_format)
    model = WindowedModel([too_long(2 * ours, None), reply("Done.")])
    ctx, sink = make_context(model)
    assert (await ctx.llm("agent", messages, tools=tools,
                          response_format=response_format)).text == "Done."
    # Asked again although the server named no window: its count alone is something learnt.
    assert model.requests[1]["messages"] == fitted(messages, ratio=2 * 1.05, tools=tools,
                                                   response_format=response_format)
    (step,) = sink.steps
    assert step.meta["trimmed"]["server_prompt_tokens"] == 2 * ours
    assert step.meta["trimmed"]["server_context_tokens"] is None
    assert step.meta["trimmed"]["dropped_messages"] + step.meta["trimmed"]["cut_messages"] > 0


async def test_a_servers_window_alone_fits_the_prompt_to_it_at_our_own_count() -> None:
    messages = long_exchange(700)
    model = WindowedModel([too_long(None, 1024), reply("Done.")])
    ctx, _ = make_context(model)
    assert (await ctx.llm("agent", messages)).text == "Done."
    assert model.requests[1]["messages"] == fitted(messages, tokens=1024)  # ratio 1: ours


async def test_what_a_run_learnt_of_a_servers_count_is_kept_for_later_calls() -> None:
    from agentlab.llm.errors import ContextTooLong
    from agentlab.runtime import window

    messages = long_exchange()
    ours = sum(map(window.message_tokens, messages)) + window.fixed_tokens()
    sent = fitted(messages, ratio=2 * 1.05)
    # Then the server counts the fitted prompt as we do: lower than learnt, nothing new.
    same = sum(map(window.message_tokens, sent)) + window.fixed_tokens()
    model = WindowedModel([too_long(2 * ours, 4096), reply("Done."), too_long(same, 4096)])
    ctx, _ = make_context(model)
    assert (await ctx.llm("agent", messages)).text == "Done."
    with pytest.raises(ContextTooLong):
        await ctx.llm("agent", messages)
    assert len(model.requests) == 3  # not asked a fourth time on a count that changes nothing
    assert model.requests[2]["messages"] == sent  # fitted at once


async def test_a_model_that_states_no_window_is_not_asked_again_after_too_long() -> None:
    from agentlab.llm.errors import ContextTooLong

    model = ScriptedModel([too_long(9000, 4096), reply("never")])
    ctx, sink = make_context(model)
    with pytest.raises(ContextTooLong):
        await ctx.llm("agent", long_exchange())
    assert len(model.requests) == 1 and sink.steps[0].status == "error"


async def test_an_edit_that_fits_leaves_no_trimmed_mark_from_the_prompt_before_it() -> None:
    async def checkpoint(step: Step) -> dict | None:
        return {"messages": [{"role": "user", "content": "Short now."}]}

    model = WindowedModel([reply("Done.")], tokens=1024)
    ctx, sink = make_context(model, checkpoint=checkpoint)
    await ctx.llm("agent", long_exchange())  # trimmed as asked; then edited to fit whole
    (step,) = sink.steps
    assert model.requests[0]["messages"] == [{"role": "user", "content": "Short now."}]
    assert step.meta["edited"] is True and "trimmed" not in step.meta


async def test_a_repeated_call_keeps_the_earlier_results_truncation_mark() -> None:
    @tool
    def report(city: str) -> str:
        """A long report."""
        return "line " * 500

    ctx, _ = make_context(ScriptedModel([]), [report], limits=Limits(max_repeats=5),
                          policies={"report": ToolPolicy(max_observation_chars=100)})
    first = await ctx.tool("report", {"city": "Paris"})
    again = await ctx.tool("report", {"city": "Paris"})
    assert first.truncated and again.truncated and again.output == first.output


async def test_cancel_without_a_task_marks_the_context_cancelled() -> None:
    ctx, _ = make_context(ScriptedModel([]))
    ctx.cancel()  # no paradigm task yet (a run cancelled before it started)
    assert ctx.cancelled


async def test_the_model_gets_the_request_as_the_step_records_it() -> None:
    model = ScriptedModel([reply("ok")])
    ctx, sink = make_context(model)
    await ctx.llm("agent", [{"role": "user", "content": "hi"}], tools=LOOKUP_TOOLS,
                  tool_choice="required", response_format=ANSWER_FORMAT, stop=["Observation:"],
                  temperature=0.3, max_tokens=50)
    (sent,) = model.requests
    assert sent == {"messages": [{"role": "user", "content": "hi"}], "tools": LOOKUP_TOOLS,
                    "tool_choice": "required", "response_format": ANSWER_FORMAT,
                    "stop": ["Observation:"], "temperature": 0.3, "max_tokens": 50}
    assert sink.steps[0].input == sent


async def test_a_server_is_asked_again_once_at_most_after_too_long() -> None:
    from agentlab.llm.errors import ContextTooLong
    from agentlab.runtime import window

    messages = long_exchange()
    ours = sum(map(window.message_tokens, messages)) + window.fixed_tokens()
    model = WindowedModel([too_long(2 * ours, 4096), too_long(4 * ours, 4096), reply("never")])
    ctx, _ = make_context(model)
    with pytest.raises(ContextTooLong):
        await ctx.llm("agent", messages)
    assert len(model.requests) == 2


async def test_a_tool_call_gets_the_runs_tool_timeout_and_its_time_is_counted() -> None:
    ctx, sink = make_context(ScriptedModel([]), [nap], limits=Limits(tool_timeout_s=0.05))
    result = await ctx.tool("nap", {"seconds": 5})
    assert result.error_type == "timeout" and sink.of_kind("tool")[0].status == "error"
    ctx, _ = make_context(ScriptedModel([]), [nap], limits=Limits(max_repeats=5))
    await ctx.tool("nap", {"seconds": 0.05})  # the subject: time spent in tools
    await ctx.tool("nap", {"seconds": 0.06})
    assert 110 <= ctx.totals.tool_ms < 60_000  # both calls, in milliseconds


async def test_a_truncated_result_marks_its_step() -> None:
    @tool
    def report(city: str) -> str:
        """A long report."""
        return "line " * 500

    ctx, sink = make_context(ScriptedModel([]), [report],
                             policies={"report": ToolPolicy(max_observation_chars=100)})
    await ctx.tool("report", {"city": "Paris"})
    (step,) = sink.of_kind("tool")
    assert step.meta == {"truncated": True} and step.output["output"] == "line " * 500


async def test_a_failed_llm_call_keeps_the_profiles_name_and_its_parent() -> None:
    from agentlab.llm.errors import EndpointUnreachable

    model = ScriptedModel([EndpointUnreachable("the server is down")], profile_name="Local")
    ctx, sink = make_context(model)
    await ctx.emit(Step(kind="plan", text="the plan"))
    with pytest.raises(EndpointUnreachable):
        await ctx.llm("solver", [{"role": "user", "content": "hi"}], parent=1)
    versions = [e for e in sink.events if e.kind == "llm"]
    assert [(v.status, v.name, v.parent, v.role) for v in versions] == [
        ("running", "Local", 1, "solver"), ("error", "Local", 1, "solver")]


async def test_a_model_without_a_reply_length_is_fitted_with_the_default_reserve() -> None:
    model = WindowedModel([reply("ok")], tokens=4096, max_tokens=None)
    ctx, _ = make_context(model)
    assert (await ctx.llm("agent", long_exchange(100))).text == "ok"


async def test_an_edited_prompt_is_what_a_server_too_long_gets_fitted_again() -> None:
    from agentlab.runtime import window

    edited = long_exchange(1400)
    edited[0]["content"] = "Edited at the breakpoint."

    async def checkpoint(step: Step) -> dict | None:
        return {"messages": edited}

    ours = sum(map(window.message_tokens, edited)) + window.fixed_tokens()
    model = WindowedModel([too_long(2 * ours, 4096), reply("Done.")])
    ctx, _ = make_context(model, checkpoint=checkpoint)
    assert (await ctx.llm("agent", [{"role": "user", "content": "Short."}])).text == "Done."
    assert model.requests[1]["messages"] == fitted(edited, ratio=2 * 1.05)


async def test_guardrail_decisions_do_not_count_towards_the_step_limit() -> None:
    from agentlab.guardrails.checks import Check
    from agentlab.runtime.guard import RunGuard

    email = Check(name="pii-flag", stage="output", kind="pii", action="flag")
    ctx, sink = make_context(ScriptedModel([]), limits=Limits(max_steps=2),
                             guard=RunGuard([email]))
    await ctx.emit(Step(kind="thought", text="Write to ada@example.com"))
    await ctx.emit(Step(kind="thought", text="and to bob@example.com"))
    kinds = [s.kind for s in sink.steps]
    assert kinds.count("guardrail") == 2 and kinds.count("thought") == 2  # no BudgetExceeded
    # Each decision names the step it is about (the run page links to it).
    assert [s.meta["step"] for s in sink.of_kind("guardrail")] == [
        s.seq for s in sink.of_kind("thought")]


def test_a_context_needs_a_default_model_and_starts_empty() -> None:
    from agentlab.runtime.context import RunContext
    from agentlab.runtime.sinks import MemorySink
    from agentlab.tools.executor import ToolExecutor

    with pytest.raises(ValueError) as info:
        RunContext(models={"planner": ScriptedModel([])}, executor=ToolExecutor({}),
                   sink=MemorySink())
    assert str(info.value) == "models needs a 'default' entry (other keys are roles)"
    ctx, _ = make_context(ScriptedModel([]))
    assert (ctx.system_prompt, ctx.agents, ctx.cancelled) == ("", {}, False)


async def test_a_pause_at_a_checkpoint_does_not_count_towards_the_timeout() -> None:
    from agentlab.runtime.loop import execute
    from tests.runtime_pieces import Scripted

    async def person_pauses(step: Step) -> dict | None:
        await asyncio.sleep(0.5)  # the subject: a person longer than the whole run may take
        return None

    async def body(ctx, task):
        return (await ctx.llm("agent", [{"role": "user", "content": task}])).text

    ctx, _ = make_context(ScriptedModel([reply("answered")]), checkpoint=person_pauses,
                          limits=Limits(total_timeout_s=0.3))
    outcome = await execute(Scripted(body), ctx, "q")
    assert (outcome.status, outcome.answer) == ("succeeded", "answered"), outcome.error


async def test_a_failed_llm_call_says_why_on_its_step_and_its_time_counts() -> None:
    from agentlab.llm.errors import EndpointUnreachable

    model = ScriptedModel([EndpointUnreachable("the server is down")], delay_s=0.05)
    ctx, sink = make_context(model)
    with pytest.raises(EndpointUnreachable) as info:
        await ctx.llm("agent", [{"role": "user", "content": "hi"}])
    (step,) = sink.of_kind("llm")
    assert (step.status, step.text, step.output) == (
        "error", str(info.value), {"error": str(info.value), "kind": info.value.kind})
    assert 45 <= step.duration_ms < 60_000 and 45 <= ctx.totals.model_ms < 60_000


async def test_model_time_adds_up_over_calls() -> None:
    ctx, _ = make_context(ScriptedModel([reply("a"), reply("b")], delay_s=0.05))
    await ctx.llm("agent", [{"role": "user", "content": "hi"}])
    await ctx.llm("agent", [{"role": "user", "content": "again"}])
    assert 95 <= ctx.totals.model_ms < 60_000  # both calls, in milliseconds


async def test_an_llm_call_cut_off_is_closed_as_interrupted() -> None:
    ctx, sink = make_context(ScriptedModel([reply("late")], delay_s=30))
    call = asyncio.create_task(ctx.llm("agent", [{"role": "user", "content": "hi"}]))
    await await_until(lambda: sink.of_kind("llm"), message="the call is under way")
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    (step,) = sink.of_kind("llm")
    assert (step.status, step.meta["interrupted"]) == ("error", True)
    assert step.output == {"error": "interrupted (cancelled or out of time)"}
    assert step.duration_ms is not None and 0 < step.duration_ms < 30_000


async def test_a_reply_without_usage_or_text_is_recorded_as_such() -> None:
    from agentlab.llm.types import ChatResult

    bare = ChatResult(text=None, tool_calls=[], finish_reason="stop", usage=None,
                      latency_ms=1.0, model="m", profile="scripted", attempts=1)
    ctx, sink = make_context(ScriptedModel([bare, reply("spoken", prompt_tokens=7,
                                                        completion_tokens=3)]))
    await ctx.llm("agent", [{"role": "user", "content": "hi"}])
    await ctx.llm("agent", [{"role": "user", "content": "hi"}])
    first, second = sink.of_kind("llm")
    assert (first.text, first.tokens_in, first.tokens_out) == ("", 0, 0)
    assert (second.text, second.tokens_in, second.tokens_out) == ("spoken", 7, 3)
    assert (ctx.totals.tokens_in, ctx.totals.tokens_out) == (7, 3)


async def test_model_time_counts_a_failed_call_after_a_good_one() -> None:
    from agentlab.llm.errors import EndpointUnreachable

    model = ScriptedModel([reply("a"), EndpointUnreachable("down")], delay_s=0.05)
    ctx, _ = make_context(model)
    await ctx.llm("agent", [{"role": "user", "content": "hi"}])
    with pytest.raises(EndpointUnreachable):
        await ctx.llm("agent", [{"role": "user", "content": "again"}])
    assert 95 <= ctx.totals.model_ms < 60_000  # the good call's time is kept


async def test_a_tool_call_a_paradigm_makes_without_a_role_is_the_agents() -> None:
    ctx, sink = make_context(ScriptedModel([]), [lookup])
    await ctx.tool("lookup", {"city": "Paris"})
    assert [s.role for s in sink.of_kind("tool")] == ["agent"]


async def test_a_step_that_names_its_parent_keeps_it_inside_a_scope() -> None:
    ctx, sink = make_context(ScriptedModel([]), [lookup])
    await ctx.emit(Step(kind="plan", text="the plan"))
    await ctx.emit(Step(kind="thought", text="a sub-task"))
    with ctx.scope(role="executor", parent=2):
        await ctx.emit(Step(kind="thought", text="inherits the scope's parent"))
        await ctx.emit(Step(kind="thought", text="names its own", parent=1))
    assert [(s.seq, s.parent) for s in sink.steps[2:]] == [(3, 2), (4, 1)]
