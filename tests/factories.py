"""Rows several test modules build the same way (plain functions; fixtures are in fixtures.py).

Runs: `make_run` is a recorded run with its steps and the totals that match them (the trace
viewer's pages, bundles, the browser tests); `new_run` a run that has not started, nothing
recorded (what the recorder starts from); `run_with_totals` a finished run with totals and no
steps (the dashboard reads only the totals)."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.management import call_command
from django.utils import timezone

from agentlab.evals.models import Case, Suite
from agentlab.models import Agent, ModelProfile
from traces.models import Run, Step


def scripted_profile(base_url: str) -> ModelProfile:
    """A model profile on the scripted OpenAI-compatible server, with prices to sum up."""
    return ModelProfile.objects.create(name="Scripted", base_url=base_url, model="scripted-model",
                                       retries=0, price_in_per_m=1, price_out_per_m=2)


def make_agents(profile: ModelProfile, n: int) -> list[Agent]:
    """`n` function-calling ReAct agents named "Agent 0", "Agent 1", … on `profile`."""
    made = []
    for i in range(n):
        agent = Agent(name=f"Agent {i}", paradigm="react", model_profile=profile,
                      params={"mode": "function_calling"})
        agent.full_clean()
        agent.save()
        made.append(agent)
    return made


def sums_suite(base_url: str) -> Suite:
    """Suite "Sums" (1 + 1, 2 + 2, 3 + 3, scored as numbers) and function-calling ReAct agents
    "Alpha" and "Beta" on the model server at `base_url`."""
    profile = ModelProfile.objects.create(name="Scripted", base_url=base_url,
                                          model="scripted-model", retries=0)
    for name in ("Alpha", "Beta"):
        agent = Agent(name=name, paradigm="react", model_profile=profile,
                      params={"mode": "function_calling"})
        agent.full_clean()
        agent.save()
    suite = Suite.objects.create(name="Sums")
    for pos, (q, e) in enumerate([("1 + 1?", "2"), ("2 + 2?", "4"), ("3 + 3?", "6")], 1):
        Case.objects.create(suite=suite, position=pos, question=q, expected=e, scorer="numeric")
    return suite


def run_experiment(*args: str) -> str:
    """What `manage.py run_experiment ARGS` prints."""
    out = io.StringIO()
    call_command("run_experiment", *args, stdout=out)
    return out.getvalue()


# ---------------------------------------------------------------------------- runs

LONG_OBSERVATION = "row " + "Paris 21C sunny; " * 300 + "END-OF-LONG-PAYLOAD"
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def demo_steps() -> list[dict[str, Any]]:
    """A multi-kind run: a plan with an llm call and a tool inside, a LATS node, a team member's
    message, a tool with SQL and a long observation, a format error, the final answer."""
    question = {"role": "user", "content": "What is the weather in Paris?"}
    return [
        {"kind": "plan", "role": "planner", "text": "1. look up the weather\n2. answer",
         "input": {"steps": ["look up the weather", "answer"]}},
        {"kind": "llm", "parent": 1, "name": "scripted-model", "tokens_in": 50, "tokens_out": 10,
         "cost_usd": 0.0002, "duration_ms": 1500,
         "input": {"messages": [{"role": "system", "content": "You are a careful agent."},
                                question],
                   "tools": [{"type": "function", "function": {"name": "get_weather"}}]},
         "output": {"text": "", "tool_calls": [{"id": "c1", "name": "get_weather",
                                                "arguments": {"city": "Paris"},
                                                "raw_arguments": '{"city": "Paris"}',
                                                "error": None}]},
         "text": ""},
        {"kind": "tool", "parent": 1, "name": "get_weather", "input": {"city": "Paris"},
         "output": {"ok": True, "output": "Sunny, 21 C"}, "text": "Sunny, 21 C",
         "duration_ms": 120},
        {"kind": "node", "name": "candidate 1", "text": "Answer from the weather report",
         "meta": {"value": 0.75, "visits": 3, "depth": 1}},
        {"kind": "message", "role": "researcher", "name": "report",
         "text": "I found the weather for the team."},
        {"kind": "tool", "name": "sql_query",
         "input": {"sql": "SELECT city, temp FROM weather WHERE city = 'Paris'"},
         "output": {"ok": True, "output": LONG_OBSERVATION}, "text": LONG_OBSERVATION,
         "duration_ms": 40},
        {"kind": "error", "status": "error", "text": "The reply was not valid JSON.",
         "meta": {"format_error": True}},
        {"kind": "final", "text": "It is sunny in Paris.", "output": "It is sunny in Paris."},
    ]


def make_run(user, steps: list[dict[str, Any]] | None = None, **fields: Any) -> Run:
    """A recorded run with its steps (seq 1..n, a second apart; by default demo_steps()) and
    totals that match them; `fields` are Run fields and win over those."""
    steps = demo_steps() if steps is None else steps
    defaults = {"input": "What is the weather in Paris?", "agent_name": "Weather agent",
                "paradigm": "react", "status": "succeeded",
                "final_answer": next((s["text"] for s in reversed(steps)
                                      if s["kind"] == "final"), ""),
                "agent_snapshot": {"paradigm": "react", "profiles": {
                    "default": {"name": "Scripted", "model": "scripted-model",
                                "base_url": "http://127.0.0.1:9/v1"}}},
                "started_at": T0, "step_count": len(steps),
                "llm_calls": sum(s["kind"] == "llm" for s in steps),
                "tool_calls": sum(s["kind"] == "tool" for s in steps),
                "tokens_in": sum(s.get("tokens_in", 0) for s in steps),
                "tokens_out": sum(s.get("tokens_out", 0) for s in steps),
                "wall_ms": len(steps) * 1000.0}
    run = Run.objects.create(user=user, **{**defaults, **fields})
    Step.objects.bulk_create(
        Step(run=run, seq=i, started_at=T0 + timedelta(seconds=i - 1), **s)
        for i, s in enumerate(steps, start=1))
    return run


def big_run(user, n: int) -> Run:
    """A run of `n` thoughts, all but the first under the first."""
    return make_run(user, [{"kind": "thought", "text": f"thinking {i}",
                            "parent": 1 if i > 1 else None} for i in range(1, n + 1)])


def new_run(user, **fields: Any) -> Run:
    """A run not started yet (queued unless `fields` say otherwise), nothing recorded."""
    return Run.objects.create(user=user, input="What is 2+2?", agent_name="t", paradigm="react",
                              **fields)


def run_with_totals(user, agent="Alpha", status="succeeded", paradigm="react", model="m-small",
                    steps=4, llm=2, tools=1, tin=100, tout=20, cost=0.01, fmt=0, refl=0,
                    days_ago=0) -> Run:
    """A run of `agent` on `model` with these totals and no steps, created `days_ago` days ago:
    what the dashboard reads."""
    run = Run.objects.create(
        user=user, agent_name=agent, paradigm=paradigm, input="q", status=status,
        agent_snapshot={"profiles": {"default": {"name": f"{model} profile", "model": model}}},
        step_count=steps, llm_calls=llm, tool_calls=tools, tokens_in=tin, tokens_out=tout,
        cost_usd=cost, format_errors=fmt, reflections=refl)
    if days_ago:
        Run.objects.filter(pk=run.pk).update(created=timezone.now() - timedelta(days=days_ago))
    return run


def make_queue(owner, reviewers=(), *, name: str = "Answers", mode: str = "single",
               keys=(), thumbs: bool = True, needed: int = 1, runs=(), pairs=()):
    """A review queue of staff `owner`, with its reviewers and rubric keys; `runs` (or, for a
    pairwise queue, `pairs` of runs) put in by the owner."""
    from agentlab.review.models import Item, Queue

    queue = Queue.objects.create(name=name, mode=mode, owner=owner, thumbs=thumbs,
                                 reviews_needed=needed)
    queue.reviewers.set(reviewers)
    queue.keys.set(keys)
    for run in runs:
        Item.objects.create(queue=queue, run=run, added_by=owner)
    for a, b in pairs:
        Item.objects.create(queue=queue, run=a, run_b=b, added_by=owner)
    return queue
