"""Live export: a run's spans go to an OTLP/HTTP collector on loopback as the run goes,
through the SDK's BatchSpanProcessor and exporter; a collector that fails costs the run
nothing and is counted on the staff status page."""

from __future__ import annotations

import asyncio
import threading

import pytest
from asgiref.sync import sync_to_async
from django.urls import reverse

from agentlab.runs.execution import execute_run
from agentlab.runs.snapshot import create_run
from tests.fake_openai import Delay, Reply
from tests.otel_fixtures import PLAN_SCRIPT, make_plan_run, plan_agent
from traces.models import Run
from traces.otel import live
from traces.otel.stream import LiveSink
from traces.otlp import export_otlp, trace_id
from traces.schema import Step as StepRecord

SCRIPT = (Reply(tool_calls=[("calculator", '{"expression": "6*7"}')]),
          Reply(tool_calls=[("calculator", '{"expression": "42+1"}')]),
          Delay(1.0, Reply(text="6*7+1 is 43.")))


def _spans(doc: dict) -> list[dict]:
    return doc["resourceSpans"][0]["scopeSpans"][0]["spans"]


@pytest.mark.django_db
def test_the_live_spans_are_the_downloads(user, collector):
    """Fed step by step as the runtime emits them (a parent running before its children),
    the live spans equal the download's: ids, parents, names, windows, attributes."""
    run = Run.objects.select_related("user").get(pk=make_plan_run(user).pk)
    steps = [s.to_record() for s in run.steps.order_by("seq")]
    sink = LiveSink.for_run(run)

    async def feed() -> None:
        # The plan step: running first, finished after its children.
        await sink.step(StepRecord(**{**steps[0].to_dict(), "status": "running",
                                      "duration_ms": None}))
        for step in steps[1:]:
            await sink.step(step)
            if step.seq == 3:
                await sink.step(steps[0])
        sink.info.finished_ns = int(run.finished_at.timestamp() * 1e9)
        await sink.status("failed", {"error": run.error})

    asyncio.run(feed())
    assert live.flush()
    got = {s.span_id.hex(): s for s in collector.spans}
    want = _spans(export_otlp(run, steps))
    assert set(got) == {s["spanId"] for s in want}
    for span in want:
        mine = got[span["spanId"]]
        assert mine.name == span["name"] and mine.trace_id.hex() == span["traceId"]
        assert mine.parent_span_id.hex() == span.get("parentSpanId", "")
        attrs = {a.key for a in mine.attributes}
        assert attrs == {a["key"] for a in span["attributes"]}
        if span["name"] not in ("error", "Weather"):  # these end when the run ends
            assert (mine.start_time_unix_nano, mine.end_time_unix_nano) == (
                int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"]))


@pytest.mark.django_db(transaction=True)
async def test_a_run_streams_its_spans_as_it_goes(calc_agent, user, fake_llm, collector):
    fake_llm.script(*SCRIPT)
    run = await sync_to_async(create_run)(calc_agent, user, "What is 6*7, plus 1?")
    await execute_run(run)
    run = await Run.objects.select_related("user").aget(pk=run.pk)
    assert run.status == "succeeded"
    assert await sync_to_async(live.flush)()
    # The first tool's span arrived while the last model call was still being answered.
    assert collector.arrivals[0] < run.finished_at.timestamp()
    assert collector.headers[0]["authorization"] == "Bearer sk-test-123"
    assert collector.headers[0]["content-type"] == "application/x-protobuf"
    assert {s.trace_id.hex() for s in collector.spans} == {trace_id(run.pk)}
    steps = [s.to_record() async for s in run.steps.order_by("seq")]
    want = await sync_to_async(lambda: _spans(export_otlp(run, steps)))()
    assert sorted(s.span_id.hex() for s in collector.spans) == sorted(s["spanId"] for s in want)
    names = sorted(s.name for s in collector.spans)
    assert names == sorted(["Calc agent", "llm scripted-model", "llm scripted-model",
                            "llm scripted-model", "calculator", "calculator", "final"])
    assert collector.resources[0]["openinference.project.name"] == "agentlab"
    assert live.STATS.sent == len(want) and live.STATS.failed == 0


@pytest.mark.django_db(transaction=True)
async def test_a_failing_collector_costs_the_run_nothing_and_is_counted(
        calc_agent, user, fake_llm, collector, client, staff, monkeypatch):
    collector.status = 503
    fake_llm.script(*SCRIPT[:2], Reply(text="6*7+1 is 43."))
    exports: list[int] = []  # the thread of each try to send spans
    real_export = live.CountingExporter.export

    def export(self, spans):
        exports.append(threading.get_ident())
        return real_export(self, spans)
    monkeypatch.setattr(live.CountingExporter, "export", export)
    run = await sync_to_async(create_run)(calc_agent, user, "What is 6*7, plus 1?")
    await execute_run(run)
    assert (await Run.objects.aget(pk=run.pk)).status == "succeeded"
    # The exporter's tries, retries and timeouts are the processor thread's, never the run's.
    assert threading.get_ident() not in exports
    await sync_to_async(live.flush)(10)
    assert exports and threading.get_ident() not in exports
    assert live.STATS.failed >= 1 and live.STATS.sent == 0
    await sync_to_async(client.force_login)(staff)
    page = (await sync_to_async(client.get)(reverse("otel_status"))).content.decode()
    assert f"{collector.url}/v1/traces" in page
    assert 'data-figure="failed">0<' not in page and "authorization" in page
    assert "sk-test-123" not in page


@pytest.mark.django_db(transaction=True)
async def test_plan_steps_go_live_as_sub_runs_enclosing_their_children(user, fake_llm,
                                                                       collector):
    agent = await sync_to_async(plan_agent)(fake_llm)
    fake_llm.script(*PLAN_SCRIPT)
    run = await sync_to_async(create_run)(agent, user, "What is (1+2)*2?")
    await execute_run(run)
    run = await Run.objects.select_related("user").aget(pk=run.pk)
    assert run.status == "succeeded", run.error
    assert await sync_to_async(live.flush)()
    spans = {s.span_id.hex(): s for s in collector.spans}
    steps = [s.to_record() async for s in run.steps.order_by("seq")]
    want = await sync_to_async(lambda: _spans(export_otlp(run, steps)))()
    assert set(spans) == {s["spanId"] for s in want}
    kinds = {sid: {a.key: a.value.string_value for a in s.attributes}[
        "openinference.span.kind"] for sid, s in spans.items()}
    subs = [s for sid, s in spans.items() if kinds[sid] == "AGENT" and s.parent_span_id]
    assert len(subs) >= 3  # the plan and each of its two items
    for sub in subs:
        children = [s for s in spans.values() if s.parent_span_id == sub.span_id]
        assert children
        assert sub.start_time_unix_nano <= min(c.start_time_unix_nano for c in children)
        assert sub.end_time_unix_nano >= max(c.end_time_unix_nano for c in children)


def test_bench_otel_measures_the_run_side_and_the_exporter(capsys):
    from django.core.management import call_command

    call_command("bench_otel", steps=20, messages=2)
    out = capsys.readouterr().out
    assert out.startswith("20 steps (2-message LLM requests): run side ")
    assert "exporter thread: 21 spans" in out  # every step and the root, encoded
