"""Recorded runs for the graph's tests (tests/test_graph.py, the browser tour): a debate, a
supervisor and a LATS search made by the real paradigms on scripted models, stored as rows; and
received framework traces imported from tests/otel_captures."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from agentlab.paradigms.lats import LATS
from agentlab.paradigms.multi_agent import MultiAgent
from agentlab.paradigms.registry import validate_params
from agentlab.runtime.limits import Limits
from agentlab.runtime.loop import execute
from agentlab.tools.decorator import tool
from tests.scripted_model import ScriptedModel, make_context
from traces.models import Run, Step
from traces.otel.importer import import_otlp
from traces.schema import Step as StepRecord

CAPTURES = Path(__file__).parent / "otel_captures"
TASK = "Which city is bigger, Paris or Lyon?"


@tool
def population(city: str) -> str:
    """Look up the population of a city."""
    return {"paris": "Paris has 2.1 million people.", "lyon": "Lyon has 0.5 million people."}.get(
        city.lower(), "No results")


def _act(city: str) -> str:
    return json.dumps({"thought": "look it up", "action": "population",
                       "action_input": {"city": city}})


def _members(*names: str) -> list[dict[str, Any]]:
    return [{"name": n, "instructions": f"You are {n}.", "tools": False} for n in names]


def _play(paradigm: Any, key: str, scripts: dict[str, list], params: dict[str, Any],
          default: list | None = None) -> list[StepRecord]:
    models = {role: ScriptedModel(script) for role, script in scripts.items()}
    ctx, sink = make_context(ScriptedModel(default or []), [population], models=models,
                             params=validate_params(key, params),
                             limits=Limits(max_llm_calls=50, max_steps=200))
    # In a thread of its own: the browser tests' Playwright holds this thread's event loop.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, execute(paradigm, ctx, TASK)).result()
    return list(sink.steps)


def debate_steps() -> list[StepRecord]:
    """Ann and Bob debate two rounds, the judge gives the verdict."""
    return _play(MultiAgent(), "multi_agent", {
        "Ann": ["Paris looks bigger.\nFinal answer: Paris", "I keep it.\nFinal answer: Paris"],
        "Bob": ["Final answer: Lyon", "Ann is right.\nFinal answer: Paris"],
        "judge": ["Both agree in the end.\nFinal answer: Paris"],
    }, {"members": _members("Ann", "Bob")})


def supervisor_steps() -> list[StepRecord]:
    """The supervisor sends the researcher, then the writer, then finishes."""
    def route(next_: str, answer: str = "") -> str:
        return json.dumps({"next": next_, "instruction": f"Over to {next_}.", "answer": answer})

    return _play(MultiAgent(), "multi_agent", {
        "supervisor": [route("researcher"), route("writer"), route("FINISH", "Paris.")],
        "researcher": ["Paris 2.1 million, Lyon 0.5 million."],
        "writer": ["Paris is bigger."],
    }, {"members": _members("researcher", "writer"), "mode": "supervisor"})


def lats_steps() -> list[StepRecord]:
    """Two iterations of two candidates each, scored by the evaluator; the solver answers."""
    return _play(LATS(), "lats", {
        "evaluator": ["Score: 3", "Score: 7", "Score: 6", "Score: 5"],
        "solver": ["Paris has 2.1 million people."],
    }, {"max_iterations": 2, "n_candidates": 2},
        default=[_act("Lyon"), _act("Paris"), _act("Paris"), _act("Lyon")])


def record(user: Any, steps: list[StepRecord], **fields: Any) -> Run:
    """A finished run holding `steps` as they were recorded."""
    defaults = {"input": TASK, "agent_name": "Team", "paradigm": "multi_agent",
                "status": "succeeded", "step_count": len(steps)}
    run = Run.objects.create(user=user, **{**defaults, **fields})
    Step.objects.bulk_create(Step.from_record(run.pk, s) for s in steps)
    return run


def imported(user: Any, capture: str) -> Run:
    """A framework's trace as received: tests/otel_captures/<capture>.json imported."""
    (run,) = import_otlp((CAPTURES / f"{capture}.json").read_bytes(), user=user)
    return run
