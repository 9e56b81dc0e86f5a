"""OpenTelemetry for the tests (a pytest plugin, loaded by conftest.py): the `collector`
fixture (live export on, to an OTLP receiver on loopback), and plain helpers to import: a
recorded Plan-and-Execute run to export (make_plan_run) and a live one to run (plan_agent,
PLAN_SCRIPT)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from tests.otlp_receiver import OTLPReceiver
from traces.models import Run, Step
from traces.otel import live
from traces.schema import Step as StepRecord

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather now in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
REQUEST = {"messages": [{"role": "system", "content": "Be brief."},
                        {"role": "user", "content": "Weather in Paris?"}],
           "tools": TOOLS, "temperature": 0.2, "max_tokens": None, "stop": None,
           "tool_choice": "auto", "response_format": None}
REPLY = {"text": "", "model": "gpt-4o-mini-2024", "finish_reason": "tool_calls", "tool_calls": [
    {"id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"},
     "raw_arguments": '{"city": "Paris"}', "error": None}]}
PROFILE = {"name": "OpenAI mini", "base_url": "https://api.openai.com/v1", "model": "gpt-4o-mini",
           "price_in_per_m": 150.0, "price_out_per_m": 600.0}
T0 = datetime(2025, 1, 1, tzinfo=UTC).timestamp()


@pytest.fixture
def collector(settings, monkeypatch):
    """Live export on, to a fresh receiver, with a short batch delay."""
    with OTLPReceiver() as receiver:
        settings.AGENTLAB_OTEL_LIVE = True
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer sk-test-123")
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2")
        live.reset()
        live.STATS.reset()
        yield receiver
        live.reset()


def make_plan_run(user) -> Run:
    """A failed Plan-and-Execute run: a plan step with a model call and a tool under it, a
    thought, a failed call, an error."""
    run = Run.objects.create(user=user, agent_name="Weather", paradigm="plan_execute",
                             input="Weather in Paris?", status="failed", final_answer="sunny?",
                             error="reached the limit", tokens_in=120, tokens_out=30,
                             agent_snapshot={"profiles": {"default": PROFILE}},
                             started_at=datetime(2025, 1, 1, tzinfo=UTC),
                             finished_at=datetime(2025, 1, 1, 0, 0, 5, tzinfo=UTC))
    records = [
        StepRecord(seq=1, kind="plan", text="1. look it up", started_at=T0 + 0.1,
                   duration_ms=10),
        StepRecord(seq=2, kind="llm", role="executor", name="gpt-4o-mini-2024", parent=1,
                   input=REQUEST, output=REPLY, tokens_in=100, tokens_out=20,
                   cost_usd=100 * 150e-6 + 20 * 600e-6, started_at=T0 + 0.5,
                   duration_ms=1500.0, meta={"profile": "OpenAI mini"}),
        StepRecord(seq=3, kind="tool", name="get_weather", parent=1, input={"city": "Paris"},
                   output={"ok": True}, text="sunny, 21 °C", started_at=T0 + 2,
                   duration_ms=100),
        StepRecord(seq=4, kind="thought", text="Now answer.", started_at=T0 + 2.5),
        StepRecord(seq=5, kind="llm", role="executor", name="OpenAI mini", status="error",
                   input=REQUEST, output={"error": "rate limited", "kind": "rate_limited"},
                   text="rate limited", started_at=T0 + 3, duration_ms=200,
                   meta={"profile": "OpenAI mini"}),
        StepRecord(seq=6, kind="error", status="error", text="reached the limit",
                   started_at=T0 + 4),
    ]
    Step.objects.bulk_create(Step.from_record(run.pk, s) for s in records)
    return run


def plan_agent(fake_llm):
    """A Plan-and-Execute agent (no replanning) on the scripted model; PLAN_SCRIPT runs it."""
    from agentlab.models import Agent, ModelProfile

    profile = ModelProfile.objects.create(name="Scripted P&E", base_url=fake_llm.base_url,
                                          model="scripted-model", retries=0)
    agent = Agent(name="Planner", paradigm="plan_execute", model_profile=profile,
                  params={"replan": False})
    agent.full_clean()
    agent.save()
    return agent


PLAN_SCRIPT = (json.dumps({"steps": ["Add 1 and 2", "Double it"]}),
               json.dumps({"thought": "easy", "action": "final_answer", "action_input": "3"}),
               json.dumps({"thought": "easy", "action": "final_answer", "action_input": "6"}),
               "The answer is 6.")
