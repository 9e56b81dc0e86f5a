"""A run stopped by a limit answers from what it found (status "stopped"); a repeated call is
answered from the earlier observation before loop detection ends the run."""

from __future__ import annotations

from typing import Any

from agentlab.paradigms.registry import get_paradigm
from agentlab.runtime.limits import Limits
from agentlab.runtime.loop import execute
from agentlab.tools.decorator import tool
from tests.scripted_model import ScriptedModel, call, make_context, reply

CALLS: list[str] = []


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    CALLS.append(city)
    return f'{{"city": "{city}", "temperature_c": 15.6}}'


def react(mode: str = "function_calling", **params: Any) -> Any:
    return get_paradigm("react")()


async def test_a_loop_is_answered_from_the_observations_and_the_run_is_stopped() -> None:
    CALLS.clear()
    same = call("get_weather", {"city": "Paris"})
    model = ScriptedModel([reply("", same), reply("", same), reply("", same),
                           reply("It is 15.6 °C in Paris.")])
    ctx, sink = make_context(model, [get_weather], params={"mode": "function_calling"})
    outcome = await execute(react(), ctx, "What is the weather in Paris?")
    assert outcome.status == "stopped"
    assert outcome.answer == "It is 15.6 °C in Paris."
    assert CALLS == ["Paris"]  # run once; the repeat was answered from its observation
    tools = [s for s in sink.steps if s.kind == "tool"]
    assert tools[1].meta == {"repeat_of": tools[0].seq} and "already called" in tools[1].text
    assert len(tools) == 2  # the third identical call is the loop: not run, the run stops
    (stop,) = [s for s in sink.steps if s.kind == "error"]
    assert stop.meta["loop"] and stop.meta["status"] == "failed"  # what stopped it, as before
    last_llm = [s for s in sink.steps if s.kind == "llm"][-1]
    assert last_llm.meta["answer_after_stop"].startswith("the agent called get_weather")
    assert last_llm.input["tools"] is None  # the answer is written without tools
    sent = last_llm.input["messages"][-1]["content"]
    assert '"temperature_c": 15.6' in sent and "What is the weather in Paris?" in sent
    final = sink.steps[-1]
    assert final.kind == "final" and final.status == "ok" and final.meta["status"] == "stopped"
    assert sink.statuses[-1][0] == "stopped"


async def test_a_spent_llm_budget_still_gets_its_answer_call() -> None:
    model = ScriptedModel([reply("", call("get_weather", {"city": "Oslo"})),
                           reply("Oslo: 15.6 °C.")])
    ctx, sink = make_context(model, [get_weather], params={"mode": "function_calling"},
                             limits=Limits(max_llm_calls=1))
    outcome = await execute(react(), ctx, "Weather in Oslo?")
    assert (outcome.status, outcome.answer) == ("stopped", "Oslo: 15.6 °C.")
    assert "reached the limit of 1 LLM calls" in (outcome.error or "")


async def test_nothing_found_means_no_answer_call_and_the_old_status() -> None:
    model = ScriptedModel([reply("", call("nope", {}))] * 3)
    ctx, sink = make_context(model, [get_weather], params={"mode": "function_calling"},
                             limits=Limits(max_llm_calls=2))
    outcome = await execute(react(), ctx, "Weather?")
    assert outcome.status == "failed" and outcome.answer.startswith("I stopped before")
    assert not any(s.meta.get("answer_after_stop") for s in sink.steps)
