"""Each ReAct mode, end to end against the real embedded SmolLM2 through the openai SDK.

What is asserted is that the trace is complete and ordered — every LLM call recorded with its
request and response, every tool call with its observation, a final step last — not that a
135M-parameter model answered well (it often does not, and the trace shows that honestly)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from agentlab.models import Agent, ModelProfile, Tool
from agentlab.runs.execution import execute_run
from agentlab.runs.snapshot import create_run
from traces.models import Run

pytestmark = [pytest.mark.embedded, pytest.mark.django_db(transaction=True)]

MODES = [("function_calling", "none"), ("text", "none"), ("json", "none"), ("json", "rule")]


@pytest.mark.parametrize(("mode", "reflector"), MODES)
async def test_a_react_run_on_the_embedded_model_records_a_complete_trace(
        embedded_llm, staff, mode, reflector):
    def setup() -> Run:
        profile = ModelProfile.objects.create(name="Embedded test", base_url=embedded_llm,
                                              model="", temperature=0, max_tokens=160,
                                              timeout_s=60, retries=0)
        agent = Agent(name=f"ReAct {mode} {reflector}", paradigm="react", model_profile=profile,
                      params={"mode": mode, "reflector": reflector, "max_iterations": 3},
                      max_llm_calls=4, total_timeout_s=100)
        agent.full_clean()
        agent.save()
        agent.tools.set(Tool.objects.filter(name__in=["get_weather", "calculator"]))
        return create_run(agent, staff, "What is the weather in Paris?")

    run = await sync_to_async(setup)()
    outcome = await execute_run(run)
    await run.arefresh_from_db()
    steps = [s async for s in run.steps.order_by("seq")]

    assert run.status == outcome.status
    assert run.status in {"succeeded", "stopped", "failed", "timed_out"}
    assert run.final_answer or run.error
    assert [s.seq for s in steps] == list(range(1, len(steps) + 1))
    assert all(s.status in {"ok", "error"} for s in steps), "a step was left running"
    assert steps[-1].kind == "final"
    llm_steps = [s for s in steps if s.kind == "llm"]
    # At most 4, + the answer after a stop (runtime/answer.py), which may go past the limit.
    answered = [s for s in llm_steps if s.meta.get("answer_after_stop")]
    assert llm_steps and len(llm_steps) == run.llm_calls <= 4 + len(answered)
    assert len(answered) <= 1 and (answered or run.status != "stopped")
    for s in llm_steps:
        assert s.input["messages"] and s.input["messages"][-1]["content"]
        assert s.output.get("usage", {}).get("prompt_tokens", 0) > 0 or s.status == "error"
        assert s.duration_ms
        # A call that failed (a timeout on a loaded machine) has no usage; it says why instead.
        if s.status == "ok":
            assert s.tokens_in > 0
        else:
            assert s.text or (s.output or {}).get("error"), "a failed call says why"
    if mode == "function_calling":
        assert llm_steps[0].input["tools"], "the tools were offered to the model"
    if mode == "json":
        assert llm_steps[0].input["response_format"]["type"] == "json_schema"
    tool_steps = [s for s in steps if s.kind == "tool"]
    assert len([s for s in tool_steps if not s.meta.get("denied")]) >= run.tool_calls
    for s in tool_steps:
        assert s.output is not None and s.text  # the observation the model saw
    assert run.tokens_in == sum(s.tokens_in for s in llm_steps)
