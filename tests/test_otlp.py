"""traces.otlp: a run as OTLP spans (JSON and protobuf) in OpenInference conventions."""

from __future__ import annotations

import json
import re

import pytest
from django.core.management import call_command
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from agentlab.chat.models import ChatTurn, Conversation
from tests.otel_fixtures import T0, make_plan_run
from traces.models import Run
from traces.otlp import export_otlp, export_otlp_protobuf, span_id, trace_id

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(user):
    return make_plan_run(user)


def spans_of(doc: dict) -> dict[str, dict]:
    (resource,) = doc["resourceSpans"]
    (scope,) = resource["scopeSpans"]
    return {s["name"]: s for s in scope["spans"]}


def attrs(span: dict) -> dict:
    return {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}


def test_one_trace_a_root_and_a_span_per_step_with_hex_ids(run):
    doc = export_otlp(run, run.steps.all())
    spans = spans_of(doc)
    assert list(spans) == ["Weather", "plan", "llm gpt-4o-mini-2024", "get_weather", "thought",
                           "llm gpt-4o-mini", "error"]
    ids = {s["traceId"] for s in spans.values()}
    assert ids == {trace_id(run.pk)} and re.fullmatch("[0-9a-f]{32}", ids.pop())
    assert all(re.fullmatch("[0-9a-f]{16}", s["spanId"]) for s in spans.values())
    assert len({s["spanId"] for s in spans.values()}) == 7
    root = spans["Weather"]
    assert root["startTimeUnixNano"] == str(1735689600 * 10**9)
    assert root["endTimeUnixNano"] == str(1735689605 * 10**9)
    assert spans["llm gpt-4o-mini-2024"]["endTimeUnixNano"] == str(
        int((T0 + 0.5) * 1e9) + 1500 * 10**6)
    json.dumps(doc)  # plain JSON all the way down


def test_protobuf_is_the_same_message(run):
    message = ExportTraceServiceRequest.FromString(export_otlp_protobuf(run, run.steps.all()))
    spans = message.resource_spans[0].scope_spans[0].spans
    doc = spans_of(export_otlp(run, run.steps.all()))
    assert [s.name for s in spans] == list(doc)
    assert [s.span_id.hex() for s in spans] == [s["spanId"] for s in doc.values()]
    assert spans[0].trace_id.hex() == trace_id(run.pk)


def test_parents_follow_the_steps_and_default_to_the_root(run):
    spans = spans_of(export_otlp(run, run.steps.all()))
    root, plan = spans["Weather"], spans["plan"]
    assert "parentSpanId" not in root and root["spanId"] == span_id(run.pk, 0)
    assert spans["llm gpt-4o-mini-2024"]["parentSpanId"] == plan["spanId"] == span_id(run.pk, 1)
    assert spans["get_weather"]["parentSpanId"] == plan["spanId"]
    assert plan["parentSpanId"] == spans["error"]["parentSpanId"] == root["spanId"]


def test_a_step_with_children_is_a_sub_run_whose_window_encloses_them(run):
    spans = spans_of(export_otlp(run, run.steps.all()))
    plan = spans["plan"]
    assert attrs(plan)["openinference.span.kind"] == "AGENT"
    assert int(plan["startTimeUnixNano"]) == int((T0 + 0.1) * 1e9)
    assert int(plan["endTimeUnixNano"]) == int(spans["get_weather"]["endTimeUnixNano"])
    # A step without a duration lasts until the next one starts; the last, until the run ends.
    thought = spans["thought"]
    assert int(thought["endTimeUnixNano"]) == int((T0 + 3) * 1e9)
    assert int(spans["error"]["endTimeUnixNano"]) == 1735689605 * 10**9


def test_openinference_attributes(run):
    spans = spans_of(export_otlp(run, run.steps.all()))
    root = attrs(spans["Weather"])
    assert root["openinference.span.kind"] == "AGENT"
    assert (root["input.value"], root["output.value"]) == ("Weather in Paris?", "sunny?")
    assert root["input.mime_type"] == "text/plain" and root["user.id"] == "alice"
    assert "llm.token_count.prompt" not in root  # Phoenix sums the LLM spans itself
    assert root["tag.tags"] == {"values": [{"stringValue": "plan_execute"}]}
    llm = attrs(spans["llm gpt-4o-mini-2024"])
    assert llm["openinference.span.kind"] == "LLM"
    assert (llm["llm.model_name"], llm["llm.provider"], llm["llm.system"]) == (
        "gpt-4o-mini-2024", "openai", "openai")
    assert llm["llm.finish_reason"] == "tool_calls"
    assert (llm["llm.token_count.prompt"], llm["llm.token_count.completion"],
            llm["llm.token_count.total"]) == ("100", "20", "120")
    assert llm["llm.cost.prompt"] == pytest.approx(0.015)
    assert llm["llm.cost.completion"] == pytest.approx(0.012)
    assert llm["llm.cost.total"] == pytest.approx(0.027)
    assert llm["llm.input_messages.0.message.role"] == "system"
    assert llm["llm.input_messages.1.message.content"] == "Weather in Paris?"
    assert llm["llm.output_messages.0.message.role"] == "assistant"
    prefix = "llm.output_messages.0.message.tool_calls.0.tool_call"
    assert llm[f"{prefix}.function.name"] == "get_weather" and llm[f"{prefix}.id"] == "call_1"
    assert json.loads(llm[f"{prefix}.function.arguments"]) == {"city": "Paris"}
    assert json.loads(llm["llm.invocation_parameters"]) == {"temperature": 0.2,
                                                            "tool_choice": "auto"}
    assert json.loads(llm["llm.tools.0.tool.json_schema"])["function"]["name"] == "get_weather"
    tool = attrs(spans["get_weather"])
    assert tool["openinference.span.kind"] == "TOOL" and tool["tool.name"] == "get_weather"
    assert tool["tool.id"] == "call_1" and tool["tool.description"] == "Weather now in a city."
    assert json.loads(tool["tool.parameters"])["properties"] == {"city": {"type": "string"}}
    assert json.loads(tool["input.value"]) == {"city": "Paris"}
    assert tool["input.mime_type"] == "application/json"
    assert tool["output.value"] == "sunny, 21 °C"
    assert attrs(spans["thought"])["openinference.span.kind"] == "CHAIN"
    (resource,) = export_otlp(run, run.steps.all())["resourceSpans"]
    res = {a["key"]: a["value"]["stringValue"] for a in resource["resource"]["attributes"]}
    assert res["openinference.project.name"] == "agentlab"


def test_a_failed_call_is_no_answer_and_names_the_model_not_the_profile(run):
    failed = spans_of(export_otlp(run, run.steps.all()))["llm gpt-4o-mini"]
    a = attrs(failed)
    assert a["llm.model_name"] == "gpt-4o-mini"
    assert not any(k.startswith("llm.output_messages") for k in a) and "output.value" not in a
    assert failed["status"] == {"code": 2, "message": "rate limited"}
    (event,) = failed["events"]
    assert event["name"] == "exception"
    assert attrs(event) == {"exception.type": "rate_limited", "exception.message": "rate limited"}


def test_errors_have_status_error_and_an_exception_event(run):
    spans = spans_of(export_otlp(run, run.steps.all()))
    assert spans["error"]["status"] == {"code": 2, "message": "reached the limit"}
    assert spans["Weather"]["status"] == {"code": 2, "message": "reached the limit"}
    assert attrs(spans["Weather"]["events"][0])["exception.type"] == "failed"
    assert spans["get_weather"]["status"] == {"code": 1}


def test_project_name_setting_and_a_chat_session(run, settings):
    settings.AGENTLAB_OTEL_PROJECT = "weather-bots"
    conversation = Conversation.objects.create(user=run.user)
    ChatTurn.objects.create(conversation=conversation, run=run, position=1)
    doc = export_otlp(Run.objects.get(pk=run.pk), run.steps.all())
    res = {a["key"]: a["value"]["stringValue"]
           for a in doc["resourceSpans"][0]["resource"]["attributes"]}
    assert res["openinference.project.name"] == "weather-bots"
    session = attrs(spans_of(doc)["Weather"])["session.id"]
    assert session.endswith(f"-chat-{conversation.pk}")


def test_ids_are_stable_per_run_and_differ_between_installations(run, monkeypatch, capsys):
    first = export_otlp(run, run.steps.all())
    call_command("export_run", str(run.pk), "--otlp")
    assert json.loads(capsys.readouterr().out) == first
    monkeypatch.setenv("AGENTLAB_INSTALLATION_ID", "another installation")
    other = spans_of(export_otlp(run, run.steps.all()))
    mine = spans_of(first)
    assert not {s["spanId"] for s in mine.values()} & {s["spanId"] for s in other.values()}
    assert other["Weather"]["traceId"] != mine["Weather"]["traceId"]


def test_export_run_writes_protobuf_to_a_file(run, tmp_path):
    path = tmp_path / "run.otlp.pb"
    call_command("export_run", str(run.pk), "--otlp-protobuf", "-o", str(path))
    assert path.read_bytes() == export_otlp_protobuf(run, run.steps.order_by("seq"))
