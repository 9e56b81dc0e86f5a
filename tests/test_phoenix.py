"""Against the real peer: Arize Phoenix (requirements-phoenix.txt, its own virtualenv made by
scripts/test) on free loopback ports. Runs go to it through the live exporter and are read
back through its REST API; spans it holds from an instrumented app come back here as runs.

Skipped only when the Phoenix virtualenv does not exist and AGENTLAB_PHOENIX_PYTHON is unset
(a developer who never ran scripts/test); scripts/test sets it, so there it always runs.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from agentlab.runs.execution import execute_run
from agentlab.runs.snapshot import create_run
from tests.fake_openai import Reply
from tests.instrumented import instrumented, weather_agent
from tests.otel_fixtures import PLAN_SCRIPT, make_plan_run, plan_agent
from traces.diff import diff_steps
from traces.models import Run
from traces.otel import live
from traces.otel.importer import import_file
from traces.otel.stream import LiveSink
from traces.otlp import spans as export_spans
from traces.schema import Step as StepRecord

REACT = (Reply(tool_calls=[("calculator", '{"expression": "6*7"}')]),
         Reply(tool_calls=[("calculator", '{"expression": "42+1"}')]),
         Reply(text="6*7+1 is 43."))


@pytest.fixture
def to_phoenix(phoenix, settings, monkeypatch):
    """Live export on, to Phoenix's OTLP/HTTP receiver."""
    settings.AGENTLAB_OTEL_LIVE = True
    settings.AGENTLAB_OTEL_PROJECT = "agentlab-live"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix.url)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    live.reset()
    live.STATS.reset()
    yield phoenix
    live.reset()


async def _feed(run: Run, steps: list[StepRecord]) -> None:
    """A recorded run through the live sink, in the order the runtime emits it."""
    sink = await sync_to_async(LiveSink.for_run)(run)
    for step in steps:
        await sink.step(step)
    await sink.status(run.status, {"answer": run.final_answer, "error": run.error})


@pytest.mark.django_db(transaction=True)
async def test_runs_sent_live_arrive_in_phoenix_whole(to_phoenix, calc_agent, user, fake_llm,
                                                      monkeypatch):
    fake_llm.script(*REACT)
    react = await sync_to_async(create_run)(calc_agent, user, "What is 6*7, plus 1?")
    await execute_run(react)
    fake_llm.script(*PLAN_SCRIPT)  # Plan-and-Execute: the plan and its items are sub-runs
    planner = await sync_to_async(plan_agent)(fake_llm)
    executed = await sync_to_async(create_run)(planner, user, "What is (1+2)*2?")
    await execute_run(executed)
    failed = await sync_to_async(make_plan_run)(user)  # a failed call, an error, a failed run
    runs = [await Run.objects.select_related("user").aget(pk=pk)
            for pk in (react.pk, failed.pk, executed.pk)]
    assert [r.status for r in runs] == ["succeeded", "failed", "succeeded"]
    await _feed(runs[1], [s.to_record() async for s in runs[1].steps.order_by("seq")])
    assert await sync_to_async(live.flush)()
    expected = {}
    for run in runs:
        steps = [s.to_record() async for s in run.steps.order_by("seq")]
        for span in await sync_to_async(export_spans)(run, steps):
            expected[f"{span.span_id:016x}"] = span
    # Run 1 of a second installation: the same run ids, salted differently.
    monkeypatch.setenv("AGENTLAB_INSTALLATION_ID", "a second installation")
    await _feed(runs[0], [s.to_record() async for s in runs[0].steps.order_by("seq")])
    assert await sync_to_async(live.flush)()
    other = {f"{s.span_id:016x}" for s in await sync_to_async(export_spans)(
        runs[0], [s.to_record() async for s in runs[0].steps.order_by("seq")])}

    got = {s["context"]["span_id"]: s for s in
           await sync_to_async(to_phoenix.spans)("agentlab-live", len(expected) + len(other))}
    assert set(got) == set(expected) | other and not set(expected) & other
    assert live.STATS.failed == 0 and live.STATS.sent == len(got)
    for sid, want in expected.items():
        span = got[sid]
        assert span["name"] == want.name
        assert span["context"]["trace_id"] == f"{want.trace_id:032x}"
        assert span["parent_id"] == (f"{want.parent_id:016x}" if want.parent_id else None)
        assert span["span_kind"] == want.attributes["openinference.span.kind"]
        assert span["status_code"] == ("ERROR" if want.error is not None else "OK")
        a = span["attributes"]
        if span["span_kind"] == "LLM":
            assert a["llm.token_count.prompt"] == want.attributes["llm.token_count.prompt"]
            assert a["llm.token_count.completion"] == want.attributes[
                "llm.token_count.completion"]
            assert a["llm.input_messages.0.message.content"] == want.attributes[
                "llm.input_messages.0.message.content"]
        if want.error is not None:
            assert [e["name"] for e in span["events"]] == ["exception"]
    traces = {s["context"]["trace_id"] for s in got.values()}
    assert len(traces) == 4  # three runs here, the first again from the second installation
    assert sum(s["span_kind"] == "AGENT" for s in got.values()) >= 3 + 3 + 1
    answer = next(s for s in got.values() if s["parent_id"] is None
                  and s["context"]["trace_id"] == f"{expected[next(iter(expected))].trace_id:032x}")
    assert answer["attributes"]["output.value"] == "6*7+1 is 43."


@pytest.mark.django_db
def test_spans_phoenix_holds_come_back_here_as_runs(phoenix, fake_llm, user, other_user):
    exporter = OTLPSpanExporter(endpoint=f"{phoenix.url}/v1/traces")
    with instrumented(exporter, project="weather-app") as (provider, memory):
        weather_agent(provider, fake_llm)
        sent = list(memory.get_finished_spans())
    assert len(phoenix.spans("weather-app", len(sent))) == len(sent)
    data = phoenix.raw("/v1/projects/weather-app/spans/otlpv1?limit=1000")
    (from_phoenix,) = import_file(data, user=user)
    from tests.instrumented import protobuf

    (direct,) = import_file(protobuf(sent), user=other_user)
    a = [s.to_record() for s in direct.steps.order_by("seq")]
    b = [s.to_record() for s in from_phoenix.steps.order_by("seq")]
    assert [(s.kind, s.name, s.parent, s.text, s.tokens_in, s.tokens_out) for s in b] == [
        (s.kind, s.name, s.parent, s.text, s.tokens_in, s.tokens_out) for s in a]
    assert b[0].input["messages"][1]["content"] == "What is the weather in Paris?"
    assert b[1].meta["weather.station"] == "LFPG"
    assert (from_phoenix.agent_name, from_phoenix.input, from_phoenix.final_answer) == (
        direct.agent_name, direct.input, direct.final_answer)
    assert {row.op for row in diff_steps(a, b).rows} == {"equal"}
