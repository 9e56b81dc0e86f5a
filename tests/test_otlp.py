"""traces.otlp: a run as OTLP/JSON spans in OpenInference conventions."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest
from django.core.management import call_command

from traces.models import Run, Step
from traces.otlp import export_otlp, span_id, trace_id
from traces.schema import Step as StepRecord

pytestmark = pytest.mark.django_db

REQUEST = {"messages": [{"role": "system", "content": "Be brief."},
                        {"role": "user", "content": "Weather in Paris?"}],
           "tools": [{"type": "function", "function": {"name": "get_weather"}}],
           "temperature": 0.2, "max_tokens": None, "stop": None, "tool_choice": "auto",
           "response_format": None}
REPLY = {"text": "", "model": "gpt-test", "tool_calls": [
    {"id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"},
     "raw_arguments": '{"city": "Paris"}', "error": None}]}


@pytest.fixture
def run(user):
    run = Run.objects.create(user=user, agent_name="Weather", paradigm="plan_execute",
                             input="Weather in Paris?", status="failed", final_answer="sunny?",
                             error="reached the limit", tokens_in=120, tokens_out=30,
                             started_at=datetime(2025, 1, 1, tzinfo=UTC),
                             finished_at=datetime(2025, 1, 1, 0, 0, 5, tzinfo=UTC))
    t = datetime(2025, 1, 1, tzinfo=UTC).timestamp()
    records = [
        StepRecord(seq=1, kind="plan", text="1. look it up", started_at=t, duration_ms=10),
        StepRecord(seq=2, kind="llm", role="executor", name="gpt-test", parent=1, input=REQUEST,
                   output=REPLY, tokens_in=100, tokens_out=20, started_at=t + 0.5,
                   duration_ms=1500.0),
        StepRecord(seq=3, kind="tool", name="get_weather", parent=1, input={"city": "Paris"},
                   output={"ok": True}, text="sunny, 21 °C", started_at=t + 2),
        StepRecord(seq=4, kind="error", status="error", text="reached the limit",
                   started_at=t + 3),
    ]
    Step.objects.bulk_create(Step.from_record(run.pk, s) for s in records)
    return run


def spans_of(doc: dict) -> dict[str, dict]:
    (resource,) = doc["resourceSpans"]
    (scope,) = resource["scopeSpans"]
    return {s["name"]: s for s in scope["spans"]}


def attrs(span: dict) -> dict:
    return {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}


def test_the_document_has_one_trace_a_root_and_a_span_per_step(run):
    doc = export_otlp(run, run.steps.all())
    spans = spans_of(doc)
    assert list(spans) == ["Weather", "plan", "llm gpt-test", "get_weather", "error"]
    ids = {s["traceId"] for s in spans.values()}
    assert ids == {trace_id(run.pk)} and re.fullmatch("[0-9a-f]{32}", ids.pop())
    assert all(re.fullmatch("[0-9a-f]{16}", s["spanId"]) for s in spans.values())
    assert len({s["spanId"] for s in spans.values()}) == 5
    root = spans["Weather"]
    assert root["startTimeUnixNano"] == str(1735689600 * 10**9)
    assert root["endTimeUnixNano"] == str(1735689605 * 10**9)
    assert spans["llm gpt-test"]["endTimeUnixNano"] == str(int((1735689600.5 + 1.5) * 1e9))
    json.dumps(doc)  # plain JSON all the way down


def test_parents_follow_the_steps_and_default_to_the_root(run):
    spans = spans_of(export_otlp(run, run.steps.all()))
    root, plan = spans["Weather"], spans["plan"]
    assert root["parentSpanId"] == "" and root["spanId"] == span_id(run.pk, 0)
    assert spans["llm gpt-test"]["parentSpanId"] == plan["spanId"] == span_id(run.pk, 1)
    assert spans["get_weather"]["parentSpanId"] == plan["spanId"]
    assert plan["parentSpanId"] == spans["error"]["parentSpanId"] == root["spanId"]


def test_openinference_attributes(run):
    spans = spans_of(export_otlp(run, run.steps.all()))
    root = attrs(spans["Weather"])
    assert root["openinference.span.kind"] == "AGENT"
    assert (root["input.value"], root["output.value"]) == ("Weather in Paris?", "sunny?")
    llm = attrs(spans["llm gpt-test"])
    assert llm["openinference.span.kind"] == "LLM" and llm["llm.model_name"] == "gpt-test"
    assert (llm["llm.token_count.prompt"], llm["llm.token_count.completion"],
            llm["llm.token_count.total"]) == ("100", "20", "120")
    assert llm["llm.input_messages.0.message.role"] == "system"
    assert llm["llm.input_messages.1.message.content"] == "Weather in Paris?"
    assert llm["llm.output_messages.0.message.role"] == "assistant"
    prefix = "llm.output_messages.0.message.tool_calls.0.tool_call"
    assert llm[f"{prefix}.function.name"] == "get_weather"
    assert json.loads(llm[f"{prefix}.function.arguments"]) == {"city": "Paris"}
    assert json.loads(llm["llm.invocation_parameters"]) == {"temperature": 0.2,
                                                            "tool_choice": "auto"}
    assert json.loads(llm["llm.tools.0.tool.json_schema"])["function"]["name"] == "get_weather"
    tool = attrs(spans["get_weather"])
    assert tool["openinference.span.kind"] == "TOOL" and tool["tool.name"] == "get_weather"
    assert json.loads(tool["input.value"]) == {"city": "Paris"}
    assert tool["input.mime_type"] == "application/json"
    assert tool["output.value"] == "sunny, 21 °C"
    assert attrs(spans["plan"])["openinference.span.kind"] == "CHAIN"


def test_errors_have_status_error_with_the_reason(run):
    spans = spans_of(export_otlp(run, run.steps.all()))
    assert spans["error"]["status"] == {"code": 2, "message": "reached the limit"}
    assert spans["Weather"]["status"] == {"code": 2, "message": "reached the limit"}
    assert spans["get_weather"]["status"] == {"code": 1}


def test_ids_are_stable_between_exports_and_the_command_prints_them(run, capsys):
    first = export_otlp(run, run.steps.all())
    call_command("export_run", str(run.pk), "--otlp")
    assert json.loads(capsys.readouterr().out) == first
