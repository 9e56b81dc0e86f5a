"""OTLP import: traces from a real OpenInference-instrumented app (tests/instrumented.py)
and Agent Lab's own exports become runs: tree, payloads, unknown attributes shown, diffable."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from tests.instrumented import (
    QUESTION,
    instrumented,
    json_bytes,
    otlp_json,
    protobuf,
    weather_agent,
)
from tests.otel_fixtures import make_plan_run
from traces.diff import diff_steps
from traces.models import Run
from traces.otel.decode import OTLPError
from traces.otel.importer import import_file, import_otlp
from traces.otlp import export_otlp, export_otlp_protobuf

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent_spans(fake_llm):
    with instrumented() as (provider, memory):
        weather_agent(provider, fake_llm)
        weather_agent(provider, fake_llm, fail_tool=True, question="And in Lyon?")
        return list(memory.get_finished_spans())


def steps_of(run: Run) -> list:
    return [s.to_record() for s in run.steps.order_by("seq")]


def test_an_instrumented_apps_protobuf_becomes_one_run_per_trace(agent_spans, user):
    first, second = import_otlp(protobuf(agent_spans), user=user)
    assert (first.input, first.final_answer) == (QUESTION, "It is sunny in Paris, 21 °C.")
    assert first.agent is None and first.agent_name == "weather-agent"
    assert first.status == "succeeded" and first.user == user
    assert first.agent_snapshot["imported_from"]["format"] == "otlp"
    assert first.agent_snapshot["imported_from"]["project"] == "weather-app"
    steps = steps_of(first)
    assert [(s.kind, s.name, s.parent) for s in steps] == [
        ("llm", "scripted-model", None), ("tool", "get_weather", None),
        ("llm", "scripted-model", None)]
    llm, tool, answer = steps
    assert llm.input["messages"][1] == {"role": "user", "content": QUESTION}
    assert llm.input["tools"][0]["function"]["name"] == "get_weather"
    call = llm.output["tool_calls"][0]
    assert (call["name"], call["arguments"]) == ("get_weather", {"city": "Paris"})
    assert (llm.tokens_in, llm.tokens_out) == (40, 12)
    assert (first.tokens_in, first.tokens_out, first.llm_calls, first.tool_calls) == (
        100, 21, 2, 1)
    assert tool.input == {"city": "Paris"} and tool.text == "sunny, 21 °C"
    assert answer.text == "It is sunny in Paris, 21 °C."
    assert answer.input["messages"][3] == {"role": "tool", "tool_call_id": call["id"],
                                           "content": "sunny, 21 °C"}
    # Unknown attributes are kept on the step, under their own names.
    assert tool.meta["weather.station"] == "LFPG" and llm.meta["llm.system"] == "openai"
    assert steps[0].started_at < steps[1].started_at < steps[2].started_at
    assert second.status == "succeeded"  # the agent went on after its tool failed
    failed_tool = steps_of(second)[1]
    assert failed_tool.status == "error" and failed_tool.meta["exception.type"] == "RuntimeError"
    assert "station offline" in failed_tool.meta["traceback"]


def test_otlp_json_with_hex_ids_and_json_lines_read_the_same(agent_spans, user):
    from_pb = [steps_of(r) for r in import_otlp(protobuf(agent_spans), user=user)]
    doc = otlp_json(agent_spans)
    from_json = [steps_of(r) for r in import_otlp(json_bytes(doc), user=user)]
    lines = b"\n".join(json_bytes(otlp_json([s])) for s in agent_spans)
    from_lines = [steps_of(r) for r in import_otlp(lines, user=user)]

    def shape(runs: list) -> list:
        return [[(s.kind, s.name, s.parent, s.text, s.tokens_in, s.meta["otel.span_id"])
                 for s in steps] for steps in runs]

    assert shape(from_json) == shape(from_pb) == shape(from_lines)
    span_ids = {s.context.span_id for s in agent_spans}
    assert {int(s[5], 16) for steps in shape(from_json) for s in steps} <= span_ids


def test_the_run_page_shows_the_import_and_its_unknown_attributes(agent_spans, client, user):
    client.force_login(user)
    upload = SimpleUploadedFile("trace.pb", protobuf(agent_spans),
                                content_type="application/x-protobuf")
    page = client.post(reverse("run_import"), {"bundle": upload}, follow=True)
    text = page.content.decode()
    assert "2 traces as runs" in text
    run = Run.objects.filter(agent_name="weather-agent").order_by("pk").first()
    detail = client.get(reverse("run", args=[run.pk])).content.decode()
    assert "weather.station" in detail and "LFPG" in detail
    assert "get_weather" in detail and "It is sunny in Paris" in detail


def test_an_agentlab_export_comes_back_as_the_same_steps(user, other_user):
    original = make_plan_run(user)
    mine = steps_of(original)
    for data in (export_otlp_protobuf(original, mine), json_bytes(export_otlp(original, mine))):
        (copy,) = import_file(data, user=other_user)
        back = steps_of(copy)
        assert [(s.seq, s.kind, s.role, s.name, s.parent, s.status) for s in back] == [
            (s.seq, s.kind, s.role, s.name, s.parent, s.status) for s in mine]
        assert [(s.tokens_in, s.tokens_out, s.text) for s in back] == [
            (s.tokens_in, s.tokens_out, s.text) for s in mine]
        assert back[1].input == mine[1].input and back[1].meta["profile"] == "OpenAI mini"
        assert (copy.agent_name, copy.paradigm, copy.status, copy.input, copy.final_answer) == (
            "Weather", "plan_execute", "failed", "Weather in Paris?", "sunny?")
        diff = diff_steps(mine, back)
        assert {row.op for row in diff.rows} == {"equal"}, diff.first_divergence


def test_an_import_diffs_against_an_agentlab_run(agent_spans, client, user):
    (imported, _) = import_otlp(protobuf(agent_spans), user=user)
    ours = make_plan_run(user)
    client.force_login(user)
    page = client.get(reverse("run_diff") + f"?a={ours.pk}&b={imported.pk}")
    assert page.status_code == 200
    text = page.content.decode()
    assert "weather-agent" in text and "get_weather" in text


@pytest.mark.parametrize("data, reason", [
    (b"\x00\x01garbage\xff", "neither JSON nor OTLP protobuf"),
    (json.dumps({"hello": 1}).encode(), "without resourceSpans"),
    (json.dumps({"resourceSpans": []}).encode(), "holds no spans"),
])
def test_what_is_not_otlp_is_refused_with_the_reason(data, reason, user):
    with pytest.raises(OTLPError, match=reason):
        import_otlp(data, user=user)
    assert not Run.objects.exists()


def test_the_upload_form_says_why_a_file_was_refused(client, user):
    client.force_login(user)
    upload = SimpleUploadedFile("noise.pb", b"\x00\x01garbage\xff")
    text = client.post(reverse("run_import"), {"bundle": upload}, follow=True).content.decode()
    assert "noise.pb was refused" in text and "neither JSON nor OTLP protobuf" in text
    broken = SimpleUploadedFile("run.json", b'{"format": "agentlab.run-bundle",')
    text = client.post(reverse("run_import"), {"bundle": broken}, follow=True).content.decode()
    assert "not valid JSON" in text and "line 1" in text
    assert not Run.objects.exists()


def test_import_run_takes_otlp_and_prints_every_run(agent_spans, user, tmp_path, capsys):
    from django.core.management import call_command

    path = tmp_path / "traces.pb"
    path.write_bytes(protobuf(agent_spans))
    call_command("import_run", str(path), "--user", user.username)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(line.startswith("Imported run ") for line in lines)
    assert Run.objects.filter(user=user, agent_name="weather-agent").count() == 2


def test_hostile_names_and_values_stay_text_on_the_run_page(client, user):
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("x").start_as_current_span("<script>alert(1)</script>", attributes={
            "openinference.span.kind": "TOOL", "<img src=x onerror=alert(2)>": "<b>bold</b>",
            "output.value": "<iframe src=//evil>"}):
        pass
    (run,) = import_otlp(protobuf(list(memory.get_finished_spans())), user=user)
    client.force_login(user)
    page = client.get(reverse("run", args=[run.pk])).content.decode()
    for hostile in ("<script>alert(1)", "<img src=x", "<b>bold", "<iframe src"):
        assert hostile not in page
    assert "&lt;img src=x onerror=alert(2)&gt;" in page and "&lt;b&gt;bold" in page
