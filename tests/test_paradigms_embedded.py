"""Each default agent, end to end on its demo question against the real embedded SmolLM2.

What is asserted is that the trace is complete and well-formed and shows the paradigm's
structure (a plan and its steps, attempts and evaluations, a tree of nodes, members' messages) —
not that a 135M-parameter model answered well: it often does not, and the trace shows that.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from agentlab.defaults import DEFAULT_AGENTS, EMBEDDED_PROFILE, load_defaults
from agentlab.models import Agent, ModelProfile
from agentlab.runs.execution import execute_run
from agentlab.runs.snapshot import create_run
from traces.models import Run

pytestmark = [pytest.mark.embedded, pytest.mark.django_db(transaction=True)]

NEW_PARADIGMS = [a.name for a in DEFAULT_AGENTS if a.paradigm != "react"]

# What each paradigm's trace must show whatever the model says: the roles of its first calls
# and the kinds of step that carry its structure.
STRUCTURE = {
    "plan_execute": ({"planner"}, set()),
    "reflexion": (set(), {"message"}),
    "rewoo": ({"planner"}, set()),
    "self_ask": ({"agent"}, set()),
    "lats": ({"agent"}, {"node"}),
    "multi_agent": (set(), {"message"}),
}


def use_embedded(url: str, **profile: object) -> None:
    """The default agents, on the embedded server under test, greedy."""
    load_defaults()
    ModelProfile.objects.filter(name=EMBEDDED_PROFILE).update(
        base_url=url, temperature=0, timeout_s=60, retries=0, **profile)


@pytest.mark.parametrize("name", NEW_PARADIGMS)
async def test_a_default_agent_on_the_embedded_model_records_a_well_formed_trace(
        embedded_llm, staff, name):
    def setup() -> Run:
        use_embedded(embedded_llm, max_tokens=128)
        agent = Agent.objects.get(name=name)
        # Tight limits keep the suite short; the trace must be complete however the run ends.
        agent.max_llm_calls, agent.total_timeout_s = 8, 90
        agent.save()
        return create_run(agent, staff, agent.demo_question)

    run = await sync_to_async(setup)()
    assert run.input, "every default agent has a demo question"
    outcome = await execute_run(run)
    await run.arefresh_from_db()
    steps = [s async for s in run.steps.order_by("seq")]

    assert run.status == outcome.status
    assert run.status in {"succeeded", "stopped", "failed", "timed_out"}, run.error
    assert run.final_answer or run.error
    assert [s.seq for s in steps] == list(range(1, len(steps) + 1))
    assert all(s.status in {"ok", "error"} for s in steps), "a step was left running"
    assert steps[-1].kind == "final"
    seqs = {s.seq for s in steps}
    for s in steps:
        assert s.parent is None or (s.parent in seqs and s.parent < s.seq), (s.seq, s.parent)
    llm_steps = [s for s in steps if s.kind == "llm"]
    # At most 8, + the answer after a stop (runtime/answer.py), which may go past the limit.
    answered = [s for s in llm_steps if s.meta.get("answer_after_stop")]
    assert llm_steps and len(llm_steps) == run.llm_calls <= 8 + len(answered)
    for s in llm_steps:
        assert s.input["messages"], "the request is recorded"
        assert s.status == "error" or s.output.get("finish_reason") is not None
    roles, kinds = STRUCTURE[run.paradigm]
    assert roles <= {s.role for s in llm_steps}, {s.role for s in llm_steps}
    assert kinds <= {s.kind for s in steps}, {s.kind for s in steps}
    assert run.tokens_in == sum(s.tokens_in for s in llm_steps)


@pytest.mark.parametrize(("question", "tool", "expected"), [
    ("What is 17 * 23?", "calculator", "391"),
    ("What is the temperature in Moscow right now, in °C?", "get_weather", "-2"),
    ("Which country has the most customers in the business database?", "sql_query", "Brazil"),
])
async def test_the_default_rewoo_agent_answers_from_what_its_tool_found(
        embedded_llm, staff, question, tool, expected):
    """The default ReWOO agent on the embedded model (temperature 0): its plan calls the tool
    the question needs, and the answer carries the tool's value (docs/PARADIGMS.md). Its
    examples cover lookups, arithmetic, SQL and code review: `similar_last` shows each question
    the ones like it (in their given order the SQL question got `get_weather[Customer]`)."""
    def setup() -> Run:
        use_embedded(embedded_llm)
        return create_run(Agent.objects.get(name="ReWOO"), staff, question)

    run = await sync_to_async(setup)()
    await execute_run(run)
    await run.arefresh_from_db()
    tools = [s async for s in run.steps.filter(kind="tool")]
    assert run.status == "succeeded", run.error
    assert [s.name for s in tools] == [tool] and tools[0].status == "ok"
    assert expected in run.final_answer, run.final_answer
