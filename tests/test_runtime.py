"""The shared runtime (agentlab/runtime/): steps, budgets, hooks, execute()."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentlab.llm.errors import EndpointUnreachable
from agentlab.paradigms.registry import get_paradigm, paradigm_keys, validate_params
from agentlab.runtime import window
from agentlab.runtime.context import Approval
from agentlab.runtime.limits import BudgetExceeded, Limits, LoopDetected
from agentlab.runtime.loop import execute
from agentlab.runtime.sinks import MemorySink
from agentlab.tools.decorator import tool
from agentlab.tools.executor import ToolPolicy
from tests.runtime_pieces import Scripted, lookup, nap
from tests.scripted_model import ScriptedModel, make_context, reply
from tests.waiting import await_until
from traces.schema import Step

MESSAGES = [{"role": "user", "content": "hi"}]


async def test_llm_step_is_sent_running_then_finished_under_one_seq() -> None:
    ctx, sink = make_context(ScriptedModel([reply("hello world", cost_usd=0.01)]))
    result = await ctx.llm("agent", MESSAGES, temperature=0.2)
    assert result.text == "hello world"
    assert [(e.seq, e.status) for e in sink.events] == [(1, "running"), (1, "ok")]
    (step,) = sink.steps
    assert step.kind == "llm" and step.name == "scripted-model"
    assert step.input["messages"] == MESSAGES and step.input["temperature"] == 0.2
    assert set(step.input) == {"messages", "tools", "tool_choice", "response_format", "stop",
                               "temperature", "max_tokens"}
    assert step.output == result.to_dict()
    assert (step.tokens_in, step.tokens_out, step.cost_usd) == (10, 5, 0.01)
    assert step.meta == {"profile": "scripted", "attempts": 1, "ttft_ms": 0.5}
    assert step.duration_ms is not None


async def test_tokens_are_streamed_to_the_sink_under_the_step_seq() -> None:
    ctx, sink = make_context(ScriptedModel([reply("hello brave world")]))
    await ctx.emit(Step(kind="thought", text="first"))
    await ctx.llm("agent", MESSAGES)
    assert {seq for seq, _ in sink.tokens} == {2}
    assert sink.text_of(2) == "hello brave world"


async def test_totals_add_up_tokens_and_cost() -> None:
    ctx, _ = make_context(ScriptedModel([reply("a", cost_usd=0.01), reply("b", cost_usd=0.02)]))
    await ctx.llm("agent", MESSAGES)
    await ctx.llm("agent", MESSAGES)
    totals = ctx.totals.as_dict()
    assert totals["llm_calls"] == 2 and totals["tokens_in"] == 20 and totals["tokens_out"] == 10
    assert totals["cost_usd"] == pytest.approx(0.03)
    assert {"wall_ms", "format_errors", "reflections", "model_ms", "tool_ms"} <= set(totals)


async def test_roles_use_their_own_model_or_the_default() -> None:
    planner = ScriptedModel([reply("plan")], profile_name="big")
    ctx, _ = make_context(ScriptedModel([reply("x")]), models={"planner": planner})
    assert (await ctx.llm("planner", MESSAGES)).text == "plan"
    assert (await ctx.llm("solver", MESSAGES)).text == "x"


async def test_token_budget_is_checked_before_the_call() -> None:
    model = ScriptedModel([reply("a"), reply("b")])
    ctx, _ = make_context(model, limits=Limits(token_budget=15))
    await ctx.llm("agent", MESSAGES)
    with pytest.raises(BudgetExceeded, match="budget of 15"):
        await ctx.llm("agent", MESSAGES)
    assert len(model.requests) == 1


async def test_llm_call_limit() -> None:
    ctx, _ = make_context(ScriptedModel([reply("a"), reply("b")]),
                          limits=Limits(max_llm_calls=1))
    await ctx.llm("agent", MESSAGES)
    with pytest.raises(BudgetExceeded, match="1 LLM calls"):
        await ctx.llm("agent", MESSAGES)


async def test_step_limit_and_seqs_are_never_reused() -> None:
    ctx, sink = make_context(ScriptedModel([]), limits=Limits(max_steps=3))
    steps = [await ctx.emit(Step(kind="thought", text=str(i))) for i in range(3)]
    steps[1].text = "edited"
    await ctx.emit(steps[1])  # an update keeps its seq and does not count
    assert [s.seq for s in sink.steps] == [1, 2, 3] and sink.steps[1].text == "edited"
    with pytest.raises(BudgetExceeded, match="3 steps"):
        await ctx.emit(Step(kind="thought"))


async def test_llm_error_is_recorded_on_the_step_and_raised() -> None:
    error = EndpointUnreachable("could not reach http://127.0.0.1:9/v1")
    ctx, sink = make_context(ScriptedModel([error]))
    with pytest.raises(EndpointUnreachable):
        await ctx.llm("agent", MESSAGES)
    (step,) = sink.steps
    assert step.status == "error"
    assert step.output == {"error": str(error), "kind": error.kind}


async def test_tool_step_records_arguments_result_and_observation() -> None:
    ctx, sink = make_context(ScriptedModel([]), [lookup])
    result = await ctx.tool("lookup", {"city": "Paris"})
    assert result.ok and "2.1 million" in result.observation
    (step,) = sink.steps
    assert (step.kind, step.name, step.status, step.input) == ("tool", "lookup", "ok",
                                                                {"city": "Paris"})
    assert step.output == result.to_dict() and step.text == result.observation
    assert ctx.findings == [result.observation] and ctx.totals.tool_calls == 1


async def test_a_tool_acts_only_once_everything_before_it_is_stored() -> None:
    """A sink with `durable()` (the Recorder: rows written behind a run) is awaited before a
    tool runs, so what led to the call is in the trace before the tool has any effect."""
    order = []

    class BehindSink(MemorySink):
        async def durable(self) -> None:
            await asyncio.sleep(0.01)  # rows still being written
            order.append(("stored", len(self.events)))

    @tool
    def effect(note: str) -> str:
        """Change the world."""
        order.append(("tool", note))
        return "done"

    ctx, _ = make_context(ScriptedModel([]), [effect])
    ctx.sink = sink = BehindSink()
    await ctx.emit(Step(kind="thought", text="I will change the world"))
    await ctx.tool("effect", {"note": "now"})
    # The thought and the tool's own running step were stored before the tool acted.
    assert order == [("stored", 2), ("tool", "now")]
    assert [s.kind for s in sink.steps] == ["thought", "tool"]


async def test_tool_needing_approval_is_denied_without_an_approver() -> None:
    ctx, sink = make_context(ScriptedModel([]), [lookup],
                             policies={"lookup": ToolPolicy(needs_approval=True)})
    result = await ctx.tool("lookup", {"city": "Paris"})
    assert not result.ok
    assert result.observation == ("Error: the user denied this call: "
                                  "no approver is attached to this run")
    approval, denied = sink.steps
    assert approval.kind == "approval" and approval.meta["approved"] is False
    assert denied.kind == "tool" and denied.status == "error"
    assert ctx.totals.tool_calls == 0


async def test_approver_can_approve_with_edited_arguments() -> None:
    seen: list[tuple[str, dict]] = []

    async def approver(step: Step) -> Approval:
        seen.append((step.status, dict(step.input)))
        return Approval(True, arguments={"city": "paris"})

    ctx, sink = make_context(ScriptedModel([]), [lookup], approver=approver,
                             policies={"lookup": ToolPolicy(needs_approval=True)})
    result = await ctx.tool("lookup", {"city": "Lyon"})
    assert result.ok and "2.1 million" in result.observation
    assert seen == [("running", {"city": "Lyon"})]
    assert [s.kind for s in sink.steps] == ["approval", "tool"]
    assert sink.steps[0].meta["approved"] is True and sink.steps[1].input == {"city": "paris"}


async def test_checkpoint_sees_the_pending_step_and_can_edit_its_input() -> None:
    pending: list[tuple[str, str]] = []

    async def checkpoint(step: Step) -> dict | None:
        pending.append((step.kind, step.status))
        return {"city": "Paris"} if step.kind == "tool" else None

    ctx, sink = make_context(ScriptedModel([reply("ok")]), [lookup], checkpoint=checkpoint)
    await ctx.llm("agent", MESSAGES)
    result = await ctx.tool("lookup", {"city": "Rome"})
    assert pending == [("llm", "running"), ("tool", "running")]
    assert "2.1 million" in result.observation and sink.steps[1].meta["edited"] is True


async def test_same_call_three_times_in_a_row_is_a_loop() -> None:
    ctx, _ = make_context(ScriptedModel([]), [lookup])
    await ctx.tool("lookup", {"city": "Rome"})
    await ctx.tool("lookup", {"city": " Rome "})  # whitespace does not make it new
    with pytest.raises(LoopDetected, match="lookup"):
        await ctx.tool("lookup", {"city": "Rome"})


# ---------------------------------------------------------------------- execute()


async def test_execute_success_emits_final_and_statuses() -> None:
    async def body(ctx, task):
        return (await ctx.llm("agent", [{"role": "user", "content": task}])).text

    ctx, sink = make_context(ScriptedModel([reply("42")]))
    outcome = await execute(Scripted(body), ctx, "6*7?")
    assert (outcome.status, outcome.answer, outcome.error) == ("succeeded", "42", None)
    assert sink.kinds() == ["llm", "final"]
    assert sink.steps[-1].text == "42" and sink.steps[-1].meta["status"] == "succeeded"
    assert sink.statuses[0] == ("running", {})
    status, detail = sink.statuses[-1]
    assert status == "succeeded" and set(detail) == {"answer", "error", "totals"}
    assert detail["totals"]["llm_calls"] == 1 and detail["totals"]["wall_ms"] > 0


async def test_execute_bug_fails_with_an_error_step() -> None:
    async def body(ctx, task):
        return len(None)  # type: ignore[arg-type]

    ctx, sink = make_context(ScriptedModel([]))
    outcome = await execute(Scripted(body), ctx, "q")
    assert outcome.status == "failed" and outcome.error.startswith("TypeError: ")
    assert sink.kinds() == ["error", "final"]
    assert sink.steps[0].text.startswith("TypeError: ")
    assert sink.statuses[-1][0] == "failed"


async def test_steps_left_running_by_a_run_that_stopped_early_are_closed() -> None:
    async def body(ctx, task):
        await ctx.emit(Step(kind="node", text="a tree node", status="running"))
        await ctx.emit(Step(kind="plan", text="done step"))
        raise BudgetExceeded("reached the limit of 1 LLM calls")

    ctx, sink = make_context(ScriptedModel([]))
    outcome = await execute(Scripted(body), ctx, "q")
    assert outcome.status == "failed"
    node = sink.of_kind("node")[0]
    assert node.status == "error"
    assert node.meta["unfinished"] == "reached the limit of 1 LLM calls"
    assert sink.of_kind("plan")[0].status == "ok"


async def test_execute_llm_error_fails_readably() -> None:
    async def body(ctx, task):
        return (await ctx.llm("agent", MESSAGES)).text

    ctx, sink = make_context(ScriptedModel([EndpointUnreachable("model server is down")]))
    outcome = await execute(Scripted(body), ctx, "q")
    assert outcome.status == "failed" and "model server is down" in outcome.error
    error = sink.of_kind("error")[0]
    assert "model server is down" in error.text and error.meta["kind"] == "unreachable"


async def test_execute_timeout_gives_a_partial_answer() -> None:
    async def body(ctx, task):
        await ctx.tool("lookup", {"city": "Paris"})
        await ctx.tool("nap", {"seconds": 5})
        return "never"

    ctx, sink = make_context(ScriptedModel([]), [lookup, nap],
                             limits=Limits(total_timeout_s=0.3))
    outcome = await execute(Scripted(body), ctx, "q")
    assert outcome.status == "timed_out" and "2.1 million" in outcome.answer
    assert outcome.error == "timed out after 0.3 s"
    assert sink.steps[-1].kind == "final" and sink.statuses[-1][0] == "timed_out"


async def test_time_waiting_for_an_approval_does_not_count_towards_the_timeout() -> None:
    async def slow_person(step: Step) -> Approval:
        await asyncio.sleep(0.5)  # longer than the whole run may take
        return Approval(True, reason="approved after a while")

    async def body(ctx, task):
        result = await ctx.tool("lookup", {"city": "Paris"})
        return result.observation

    ctx, sink = make_context(ScriptedModel([]), [lookup], limits=Limits(total_timeout_s=0.3),
                             policies={"lookup": ToolPolicy(needs_approval=True)},
                             approver=slow_person)
    outcome = await execute(Scripted(body), ctx, "q")
    assert outcome.status == "succeeded", outcome.error
    assert "2.1 million" in outcome.answer


async def napping_run() -> tuple[Any, Any, asyncio.Task]:
    """A run whose paradigm sits in a 5 s tool call, 0.1 s in: (ctx, sink, its task)."""
    async def body(ctx, task):
        await ctx.tool("nap", {"seconds": 5})
        return "never"

    ctx, sink = make_context(ScriptedModel([]), [nap])
    run = asyncio.create_task(execute(Scripted(body), ctx, "q"))
    await await_until(lambda: sink.of_kind("tool"), message="the tool call is under way")
    return ctx, sink, run


async def test_cancel_interrupts_a_running_tool() -> None:
    ctx, sink, run = await napping_run()
    ctx.cancel()
    outcome = await asyncio.wait_for(run, 2)
    assert outcome.status == "cancelled"
    assert sink.steps[-1].kind == "final" and sink.statuses[-1][0] == "cancelled"
    (nap_step,) = sink.of_kind("tool")  # not left "running" in the trace
    assert nap_step.status == "error" and nap_step.meta["interrupted"] is True


# ---------------------------------------------------------------------- registry


def test_validate_params_fills_defaults() -> None:
    assert validate_params("react", {}) == {"mode": "function_calling", "max_iterations": 8,
                                            "reflector": "none", "few_shot": [],
                                            "first_tool_choice": "auto"}
    assert validate_params("react", {"mode": "text"})["mode"] == "text"


@pytest.mark.parametrize(("params", "field"), [
    ({"mode": "telepathy"}, "mode"), ({"max_iterations": 0}, "max_iterations"),
    ({"colour": "red"}, "colour"),
])
def test_validate_params_names_the_bad_field(params: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        validate_params("react", params)


def test_get_paradigm_lists_known_keys() -> None:
    assert get_paradigm("react").label == "ReAct"
    assert "react" in paradigm_keys()
    with pytest.raises(KeyError, match="known paradigms: .*react"):
        get_paradigm("telepathy")


async def test_cancelling_the_task_itself_records_then_propagates() -> None:
    _ctx, sink, run = await napping_run()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert sink.steps[-1].kind == "final" and sink.statuses[-1][0] == "cancelled"


# ------------------------------------------------------------------ context windows


def _window_model(fake_llm, context_tokens: int = 1024, max_tokens: int = 128):
    from agentlab.llm.client import OpenAIChatModel
    from agentlab.llm.types import ProfileConfig

    return OpenAIChatModel(ProfileConfig(
        name="Small window", base_url=fake_llm.base_url, model="scripted-model", retries=0,
        context_tokens=context_tokens, max_tokens=max_tokens))


def _chat(turns: int, words: int = 30) -> list[dict[str, str]]:
    return [m for i in range(turns) for m in (
        {"role": "user", "content": f"question {i}: " + "word " * words},
        {"role": "assistant", "content": f"answer {i}: " + "word " * words})]


async def test_the_llm_step_records_the_fitted_prompt_the_server_received(fake_llm) -> None:
    from tests.fake_openai import Reply

    history = _chat(30)
    observation = "Observation: " + "row " * 6000
    messages = [{"role": "system", "content": "You answer from the observations."}, *history,
                {"role": "user", "content": "How many rows?"},
                {"role": "assistant", "content": "Let me count them."},
                {"role": "user", "content": observation}]
    fake_llm.script(Reply(text="Many rows."))
    ctx, sink = make_context(_window_model(fake_llm), history=history)
    result = await ctx.llm("agent", messages)
    assert result.text == "Many rows."
    (step,) = sink.steps
    sent = fake_llm.last_request["messages"]
    assert step.input["messages"] == sent  # the trace holds exactly what the server read
    assert sent[0] == messages[0] and sent[-3:-1] == messages[-3:-1]  # system, question, reply
    assert "characters cut to fit the model's context window" in sent[-1]["content"]
    trimmed = step.meta["trimmed"]
    dropped = trimmed["dropped_turns"]
    assert dropped > 0 and sent[1:-3] == history[2 * dropped:]  # the oldest turns went
    assert trimmed["dropped_messages"] == 2 * dropped and trimmed["cut_messages"] == 1
    assert trimmed["chars_cut"] == len(observation) - (len(sent[-1]["content"]) - len(
        f"\n[… {trimmed['chars_cut']:,} characters cut to fit the model's context window …]\n"))
    assert trimmed["budget"] == 1024 - 128 and trimmed["estimated_tokens"] <= 896
    assert len(messages) == 64 and messages[-1]["content"] == observation  # the caller's list


async def test_a_message_that_cannot_fit_is_refused_before_anything_is_sent(fake_llm) -> None:
    async def body(ctx, task):
        return (await ctx.llm("agent", [{"role": "system", "content": "Be brief."},
                                        {"role": "user", "content": task}])).text

    ctx, sink = make_context(_window_model(fake_llm))
    outcome = await execute(Scripted(body), ctx, "Summarise this: " + "lorem ipsum " * 800)
    assert fake_llm.requests == [] and ctx.totals.llm_calls == 0
    assert outcome.status == "failed"
    assert outcome.error.startswith("the message is ~") and (
        "Small window reads at most 1,024 tokens (with 128 kept for the reply)" in outcome.error)
    (step,) = sink.of_kind("llm")
    assert step.status == "error" and step.output["kind"] == "context_too_long"
    assert step.meta["refused"]["budget"] == 896 and step.meta["refused"][
        "estimated_tokens"] > 896
    assert sink.of_kind("error")[0].meta["kind"] == "context_too_long"
    assert outcome.error in sink.of_kind("final")[0].text  # what the chat shows


async def test_a_server_that_counts_more_gets_the_prompt_fitted_to_its_count(fake_llm) -> None:
    from tests.fake_openai import Fail, Reply

    # Our estimate lets the prompt through; the server's tokenizer counts twice as much.
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Go."},
                {"role": "assistant", "content": "Reading."},
                {"role": "user", "content": "Observation: " + "cell " * 2500}]
    fake_llm.script(Fail(400, "This model's maximum context length is 4096 tokens. However, "
                              "you requested 7400 tokens (7272 in the messages, 128 in the "
                              "completion).", "context_length_exceeded"),
                    Reply(text="Done."), Reply(text="Done again."))
    ctx, sink = make_context(_window_model(fake_llm, context_tokens=4096))
    assert (await ctx.llm("agent", messages)).text == "Done."
    first, second = (r["messages"] for r in fake_llm.requests)
    assert first == messages and len(second[-1]["content"]) < len(messages[-1]["content"]) / 2
    (step,) = sink.steps
    assert step.status == "ok" and step.input["messages"] == second
    assert step.meta["trimmed"]["server_prompt_tokens"] == 7272
    # The run keeps the server's count: the next call is fitted at once.
    assert (await ctx.llm("agent", messages)).text == "Done again."
    assert len(fake_llm.requests) == 3 and fake_llm.requests[2]["messages"] == second


async def test_a_refit_after_the_servers_count_starts_from_what_the_agent_asked_to_send(
        fake_llm) -> None:
    import re

    from tests.fake_openai import Fail, Reply

    # Our own estimate already cuts the observation; the server then counts the cut prompt
    # over its window. The second cut is made from the whole observation, not from the first
    # cut: one marker, whose count is every character left out.
    observation = "Observation: " + "cell " * 5000
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Go."},
                {"role": "assistant", "content": "Reading."},
                {"role": "user", "content": observation}]
    fake_llm.script(Fail(400, "This model's maximum context length is 4096 tokens. However, "
                              "you requested 7400 tokens (7272 in the messages, 128 in the "
                              "completion).", "context_length_exceeded"), Reply(text="Done."))
    ctx, sink = make_context(_window_model(fake_llm, context_tokens=4096))
    assert (await ctx.llm("agent", messages)).text == "Done."
    first, second = (r["messages"][-1]["content"] for r in fake_llm.requests)
    assert len(second) < len(first) < len(observation)
    (marker,) = re.findall(r"\[… ([\d,]+) characters cut", second)
    (step,) = sink.steps
    assert int(marker.replace(",", "")) == step.meta["trimmed"]["chars_cut"]
    kept = len(second) - len(window.MARKER.format(chars=int(marker.replace(",", "")))) - 2
    assert step.meta["trimmed"]["chars_cut"] == len(observation) - kept


async def test_an_edit_at_a_breakpoint_is_fitted_too(fake_llm) -> None:
    async def checkpoint(step: Step) -> dict | None:
        return {"messages": [{"role": "user", "content": "Short? " + "more " * 5000}]}

    ctx, sink = make_context(_window_model(fake_llm), checkpoint=checkpoint)
    from agentlab.llm.errors import ContextTooLong

    with pytest.raises(ContextTooLong, match="the message is ~"):
        await ctx.llm("agent", [{"role": "user", "content": "Short."}])
    (step,) = sink.steps
    assert step.status == "error" and step.meta["edited"] and fake_llm.requests == []


async def test_a_server_count_that_leaves_no_room_is_reported_in_its_own_words(fake_llm) -> None:
    from agentlab.llm.errors import ContextTooLong
    from tests.fake_openai import Fail

    fake_llm.script(Fail(400, "This model's maximum context length is 4096 tokens. However, "
                              "you requested 9000 tokens (9000 in the messages, 0 in the "
                              "completion).", "context_length_exceeded"))
    ctx, sink = make_context(_window_model(fake_llm, context_tokens=4096))
    question = [{"role": "user", "content": "Translate: " + "bonjour tout le monde " * 250}]
    with pytest.raises(ContextTooLong) as info:
        await ctx.llm("agent", question)
    # Fitted to the server's count the question alone no longer fits: not an estimate scaled
    # by that count, but what the server said.
    assert str(info.value).startswith("the prompt is too long for 'scripted-model': the server "
                                      "counted 9,000 tokens for a window of 4,096")
    assert len(fake_llm.requests) == 1 and sink.steps[0].status == "error"
