"""The OTLP receiver, `POST /v1/traces`: an instrumented agent's spans become a live run.

The spans are the real OpenTelemetry SDK's, encoded by its own OTLP encoder (tests/otlp_spans.py)
and sent through the project's ASGI application as daphne serves it (tests/receiver_client.py),
in the order an exporter sends them; one test sends them with the SDK's own OTLPSpanExporter to
a real daphne process."""

from __future__ import annotations

import gzip
import random
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from django.utils import timezone
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from agentlab.bench.otlp_payload import agent_trace, batches, encode, export_order
from agentlab.receiver import held, store
from agentlab.receiver.models import ReceivedSpan, ReceivedTrace
from agentlab.runs.room import going
from agentlab.tokens.models import create_token
from tests.otlp_spans import AgentTrace, encoded
from tests.receiver_client import post_traces
from tests.sockets import connect, frames_until, is_type, synced
from traces.models import Run
from traces.otel.decode import traces
from traces.otel.importer import draft
from traces.otel.steps import run_from_trace

PROTOBUF = "application/x-protobuf"
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def token(user):
    return create_token(user, "agent", "ingest")[1]


async def send(token: str, body: bytes, *, content_type: str = PROTOBUF, **headers: str):
    return await post_traces(body, content_type=content_type,
                             **{"Authorization": f"Bearer {token}", **headers})


async def received(user) -> Run:
    trace = await ReceivedTrace.objects.select_related("run").aget(user=user)
    return trace.run


def steps_of(run: Run) -> list[tuple]:
    return [(s.seq, s.parent, s.kind, s.name, s.status)
            for s in run.steps.order_by("seq")]


async def test_spans_become_a_live_run_that_ends_as_the_import_of_the_same_spans(user, token):
    agent = AgentTrace()
    agent.start()
    agent.llm_asks_tool()
    response = await send(token, encoded(agent.ended))
    assert response.status_code == 200
    assert response.headers["Content-Type"] == PROTOBUF
    ExportTraceServiceResponse.FromString(response.content)  # the spec's success body

    run = await received(user)
    assert run.status == "running" and run.user_id == user.pk
    live = await sync_to_async(steps_of)(run)
    # The LLM call hangs under a placeholder for the agent span that has not ended yet.
    assert [s[2:] for s in live] == [("thought", "(span not arrived yet)", "running"),
                                     ("llm", "gpt-test", "ok")]
    assert live[1][1] == live[0][0]

    agent.tool()
    agent.llm_answers()
    await send(token, encoded(agent.ended[1:]))
    assert (await Run.objects.aget(pk=run.pk)).status == "running"
    agent.finish()
    await send(token, encoded(agent.ended[3:]))

    run = await Run.objects.aget(pk=run.pk)
    assert run.status == "succeeded"
    assert run.input == AgentTrace.QUESTION and run.final_answer == "It is sunny in Paris."
    assert (run.llm_calls, run.tool_calls, run.tokens_in, run.tokens_out) == (2, 1, 60, 13)
    _fields, expected = run_from_trace(traces(encoded(agent.ended))[agent.root.context.trace_id
                                                                    .to_bytes(16, "big").hex()])
    assert await sync_to_async(steps_of)(run) == [
        (s.seq, s.parent, s.kind, s.name, s.status) for s in expected]
    assert run.step_count == len(expected) == 3
    assert run.agent_snapshot["imported_from"]["received"] is True


async def test_an_exporters_retry_changes_nothing(user, token):
    spans = AgentTrace().whole()
    first = await send(token, encoded(spans[:2]))
    again = await send(token, encoded(spans[:2]))
    assert first.status_code == again.status_code == 200
    run = await received(user)
    assert await ReceivedSpan.objects.filter(trace__run=run, data__isnull=False).acount() == 2
    await send(token, encoded(spans))
    await send(token, encoded(spans))
    run = await Run.objects.aget(pk=run.pk)
    assert run.status == "succeeded" and run.step_count == 3 and run.llm_calls == 2


async def test_a_trace_that_comes_whole_is_a_finished_run_at_once_beside_an_open_one(
        user, token):
    """One request holding a whole trace (and another trace's first spans): right after it,
    the whole one's run is finished as the import of its spans makes it, and its trace is
    done; the open one is running with its live steps. A retry changes nothing."""
    spans = AgentTrace().whole()
    opening = AgentTrace(service="other-app")
    opening.start()
    opening.llm_asks_tool()
    body = encoded(spans + opening.ended)
    assert (await send(token, body)).status_code == 200
    trace_id = spans[0].context.trace_id.to_bytes(16).hex()
    got = await Run.objects.aget(received__trace_id=trace_id)
    assert (got.status, got.input, got.final_answer, got.error) == (
        "succeeded", "Weather in Paris?", "It is sunny in Paris.", "")
    assert (got.step_count, got.llm_calls, got.tool_calls, got.tokens_in, got.tokens_out) == (
        3, 2, 1, 60, 13)
    want, _steps = draft(trace_id, traces(encoded(spans))[trace_id])
    for name in ("agent_name", "started_at", "finished_at", "wall_ms", "cost_usd"):
        assert getattr(got, name) == want[name], name
    assert got.agent_snapshot["imported_from"]["received"] is True
    assert await sync_to_async(steps_of)(got) == [
        (s.seq, s.parent, s.kind, s.name, s.status) for s in _steps]
    trace = await ReceivedTrace.objects.aget(run=got)
    assert (trace.done, trace.spans, trace.next_seq) == (True, 4, 5)
    assert trace.root_span_id == f"{spans[-1].context.span_id:016x}"
    other = await Run.objects.aget(agent_name="other-app")
    assert (other.status, other.step_count, other.llm_calls) == ("running", 2, 1)

    await send(token, body)  # an exporter's retry
    assert await sync_to_async(store.close_quiet)(timezone.now() + timedelta(seconds=301))
    again = await Run.objects.aget(pk=got.pk)
    assert (again.status, again.final_answer, again.step_count, again.finished_at) == (
        "succeeded", got.final_answer, 3, got.finished_at)
    assert await Run.objects.acount() == 2


def test_a_trace_that_comes_whole_writes_its_run_and_trace_rows_once(user):
    """Its run and its trace's row are inserted as they end: no UPDATE of either after."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        store.receive(user, "", traces(encoded(AgentTrace().whole())))
    tables = {Run._meta.db_table: 0, ReceivedTrace._meta.db_table: 0}
    for query in queries.captured_queries:
        for table, n in tables.items():
            sql = query["sql"].upper()
            if f'UPDATE "{table.upper()}"' in sql:
                raise AssertionError(f"{table} updated: {query['sql'][:200]}")
            tables[table] = n + sql.startswith(f'INSERT INTO "{table.upper()}"')
    assert tables == {Run._meta.db_table: 1, ReceivedTrace._meta.db_table: 1}
    run = Run.objects.get()
    assert (run.status, run.step_count, run.received.done) == ("succeeded", 3, True)


async def test_a_whole_trace_made_meanwhile_by_another_request_is_taken_as_stored(
        user, token, monkeypatch):
    """Another process made the trace between this request's look-up and its insert (the
    look-up missed it here): what was read of it before the insert is dropped, and the spans
    are taken into the stored trace, once each, its run read whole."""
    from agentlab.receiver import rows

    spans = AgentTrace().whole()
    await send(token, encoded(spans[:2]))  # the trace made, open
    looked_up = rows.batched

    def miss_once(items, n):
        monkeypatch.setattr(rows, "batched", looked_up)
        return iter(())

    monkeypatch.setattr(rows, "batched", miss_once)
    body = ExportTraceServiceResponse.FromString((await send(token, encoded(spans))).content)
    assert rows.batched is looked_up and body.partial_success.rejected_spans == 0
    run = await Run.objects.aget()
    assert (run.status, run.step_count, run.llm_calls, run.final_answer) == (
        "succeeded", 3, 2, "It is sunny in Paris.")
    assert await ReceivedSpan.objects.filter(data__isnull=False).acount() == 4


async def test_watchers_see_each_span_as_it_is_stored_and_the_end(user, token):
    agent = AgentTrace()
    agent.start()
    agent.llm_asks_tool()
    await send(token, encoded(agent.ended))
    run = await received(user)
    comm = await connect(run.pk, user)
    try:
        backfill = await synced(comm)
        assert [f["seq"] for f in backfill if f["type"] == "step"] == [1, 2]
        agent.tool()
        await send(token, encoded(agent.ended[1:]))
        frames = await frames_until(comm, is_type("step", seq=3))
        assert frames[-1]["kind"] == "tool" and "get_weather" in frames[-1]["html"]
        agent.llm_answers()
        agent.finish()
        await send(token, encoded(agent.ended[2:]))
        frames = await frames_until(comm, is_type("status"))
        assert frames[-1]["status"] == "succeeded"
    finally:
        await comm.disconnect()


async def test_gzip_and_json_as_exporters_send_them(user, token):
    from google.protobuf import json_format

    spans = AgentTrace().whole()
    response = await send(token, gzip.compress(encoded(spans[:2])),
                          HTTP_CONTENT_ENCODING="gzip", **{"Content-Encoding": "gzip"})
    assert response.status_code == 200
    doc = json_format.MessageToJson(__import__(
        "opentelemetry.exporter.otlp.proto.common.trace_encoder",
        fromlist=["encode_spans"]).encode_spans(spans[2:]))
    response = await send(token, doc.encode(), content_type="application/json")
    assert response.status_code == 200 and response.headers["Content-Type"] == "application/json"
    run = await Run.objects.aget(pk=(await received(user)).pk)
    assert run.status == "succeeded" and run.step_count == 3


@pytest.mark.parametrize("headers, status", [
    ({}, 401), ({"Authorization": "Bearer al_nope"}, 401)])
async def test_without_a_good_token_nothing_is_stored(user, headers, status):
    response = await post_traces(encoded(AgentTrace().whole()), **headers)
    assert response.status_code == status
    assert not await Run.objects.aexists()


async def test_a_token_of_another_scope_is_refused(user):
    gateway = await sync_to_async(create_token)(user, "gw", "gateway")
    response = await send(gateway[1], encoded(AgentTrace().whole()))
    assert response.status_code == 403
    assert not await Run.objects.aexists()


async def test_one_trace_id_from_two_users_is_two_runs(user, other_user, token):
    spans = AgentTrace().whole()
    other = (await sync_to_async(create_token)(other_user, "theirs", "ingest"))[1]
    await send(other, encoded(spans))
    await send(token, encoded(spans[:1]))
    mine, theirs = await received(user), await received(other_user)
    assert mine.pk != theirs.pk
    assert (await Run.objects.aget(pk=theirs.pk)).status == "succeeded"
    assert (await Run.objects.aget(pk=mine.pk)).status == "running"


async def test_a_trace_that_goes_quiet_ends_interrupted_with_what_it_has(user, token):
    agent = AgentTrace()
    agent.start()
    agent.llm_asks_tool()
    agent.tool()
    await send(token, encoded(agent.ended))
    run = await received(user)
    assert await sync_to_async(store.close_quiet)() == []  # not quiet yet
    later = timezone.now() + timedelta(seconds=301)
    (event,) = await sync_to_async(store.close_quiet)(later)
    assert event[1]["status"] == "interrupted"
    run = await Run.objects.aget(pk=run.pk)
    assert run.status == "interrupted" and "No root span arrived" in run.error
    kinds = await sync_to_async(lambda: [s.kind for s in run.steps.order_by("seq")])()
    assert kinds == ["llm", "tool"]  # what it had; no placeholder left


async def test_received_runs_hold_no_place_under_the_users_limit(user, token):
    agent = AgentTrace()
    agent.start()
    agent.llm_asks_tool()
    await send(token, encoded(agent.ended))
    assert (await received(user)).status == "running"
    assert await sync_to_async(going(user.pk).count)() == 0


async def test_spans_past_the_runs_limit_are_refused_as_a_partial_success(user, token,
                                                                           settings):
    settings.AGENTLAB_RECEIVER_MAX_SPANS_PER_RUN = 2
    response = await send(token, encoded(AgentTrace().whole()))
    assert response.status_code == 200
    body = ExportTraceServiceResponse.FromString(response.content)
    assert body.partial_success.rejected_spans == 2
    assert "AGENTLAB_RECEIVER_MAX_SPANS_PER_RUN" in body.partial_success.error_message


async def test_bad_data_is_a_400_that_says_why(user, token):
    response = await send(token, b"\xff\x00 not protobuf")
    assert response.status_code == 400
    assert not await Run.objects.aexists()


async def test_errors_around_the_view_are_the_specs_not_djangos_pages(user, token,
                                                                        monkeypatch):
    """The receiver is served past the middleware (agentlab/fast_api.py): an unknown Host or a
    failure of the view still answers the exporter in OTLP's error shape, not an HTML page."""
    response = await send(token, encoded(AgentTrace().whole()), content_type="application/json",
                          Host="evil.example")
    assert response.status_code == 400
    assert response.headers["Content-Type"] == "application/json"
    assert "ALLOWED_HOSTS" in response.json()["message"]

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("agentlab.receiver.protocol.check_length", broken)
    response = await send(token, encoded(AgentTrace().whole()))
    assert response.status_code == 500
    assert response.headers["Content-Type"] == PROTOBUF
    assert b"The receiver failed on this request." in response.content
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert not await Run.objects.aexists()


async def test_the_project_comes_from_the_header_or_the_resource(user, token):
    await send(token, encoded(AgentTrace(project="shop").whole()))
    assert (await ReceivedTrace.objects.aget(user=user)).project == "shop"
    await send(token, encoded(AgentTrace().whole()), **{"x-agentlab-project": "billing"})
    assert await ReceivedTrace.objects.filter(user=user, project="billing").aexists()


async def test_the_runs_list_shows_a_received_run_going_and_filters_by_project(user, token):
    agent = AgentTrace(project="shop")
    agent.start()
    agent.llm_asks_tool()
    await send(token, encoded(agent.ended))
    await send(token, encoded(AgentTrace().whole()))  # another project, finished
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    page = (await client.get("/runs/")).content.decode()
    assert 'data-refresh-s="2"' in page  # a run on it is going: the table reloads often
    assert "Receiving trace" in page and "Weather in Paris?" in page
    shop = (await client.get("/runs/?project=shop")).content.decode()
    assert "Receiving trace" in shop and "Weather in Paris?" not in shop
    assert '<option value="shop"' in shop and '<option value="weather-app"' in shop


def test_the_sdks_own_exporter_sends_a_whole_agent_to_a_real_server(live_url, user, token):
    """The OTLP/HTTP exporter as an instrumented app runs it: batches, gzip, its own headers,
    against daphne; what it is told decides whether it retries, so it must hear success."""
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    exporter = OTLPSpanExporter(endpoint=f"{live_url}/v1/traces", compression=Compression.Gzip,
                                headers={"Authorization": f"Bearer {token}"})
    spans = AgentTrace().whole()
    assert exporter.export(spans[:2]) == SpanExportResult.SUCCESS
    assert exporter.export(spans[2:]) == SpanExportResult.SUCCESS
    run = ReceivedTrace.objects.select_related("run").get(user=user).run
    assert (run.status, run.input, run.final_answer) == (
        "succeeded", AgentTrace.QUESTION, "It is sunny in Paris.")
    assert [s.kind for s in run.steps.order_by("seq")] == ["llm", "tool", "llm"]
    refused = OTLPSpanExporter(endpoint=f"{live_url}/v1/traces",
                               headers={"Authorization": "Bearer al_wrong"})
    assert refused.export(spans) == SpanExportResult.FAILURE


async def test_the_receiver_itself_ends_a_trace_that_goes_quiet(user, token, settings):
    settings.AGENTLAB_RECEIVER_QUIET_S = 1
    agent = AgentTrace()
    agent.start()
    agent.llm_asks_tool()
    await send(token, encoded(agent.ended))
    run = await received(user)
    comm = await connect(run.pk, user)
    try:
        await synced(comm)
        frames = await frames_until(comm, is_type("status"), timeout=10)
        assert frames[-1]["status"] == "interrupted"
    finally:
        await comm.disconnect()
    assert (await Run.objects.aget(pk=run.pk)).status == "interrupted"


async def test_a_body_declared_too_large_is_refused_before_it_is_read(user, token, settings):
    from channels.testing import HttpCommunicator

    from agentlab.asgi import application

    settings.AGENTLAB_RECEIVER_MAX_BODY_BYTES = 1_000
    body = encoded(AgentTrace().whole())
    assert len(body) > 1_000
    headers = [(b"host", b"localhost"), (b"authorization", f"Bearer {token}".encode()),
               (b"content-type", PROTOBUF.encode()), (b"content-length", str(len(body)).encode())]
    response = await HttpCommunicator(application, "POST", "/v1/traces", body=body,
                                      headers=headers).get_response()
    assert response["status"] == 413
    assert b"AGENTLAB_RECEIVER_MAX_BODY_BYTES" in response["body"]
    assert (b"connection", b"close") in response["headers"]  # the cap's answer, not the view's
    assert not await Run.objects.aexists()
    settings.AGENTLAB_RECEIVER_MAX_BODY_BYTES = 1_000_000
    response = await HttpCommunicator(application, "POST", "/v1/traces", body=body,
                                      headers=headers).get_response()
    assert response["status"] == 200


async def test_a_received_runs_page_says_where_it_comes_from_and_has_no_controls(user, token):
    agent = AgentTrace()
    agent.start()
    agent.llm_asks_tool()
    await send(token, encoded(agent.ended))
    run = await received(user)
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    page = (await client.get(f"/runs/{run.pk}/")).content.decode()
    assert "Receiving spans from <code>weather-app</code>" in page
    assert 'data-act="pause"' not in page and "Step mode" not in page
    assert "(span not arrived yet)" in page


async def test_two_received_runs_diff_at_the_tool_and_replay_step_by_step(user, token):
    await send(token, encoded(AgentTrace().whole("sunny, 21 °C")))
    await send(token, encoded(AgentTrace().whole("rain, 12 °C")))
    a, b = [t.run_id async for t in ReceivedTrace.objects.filter(user=user).order_by("pk")]
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    page = (await client.get(f"/runs/diff/?a={a}&b={b}")).content.decode()
    first = page[page.index('id="first-divergence"'):]
    first = first[:first.index("</tr>")]
    assert "get_weather" in first and "<ins>rain</ins>" in first
    step = (await client.get(f"/runs/{a}/?step=2")).content.decode()
    assert 'data-current="2"' in step and "step 2 / 3" in step
    exported = await client.get(f"/runs/{a}/export/otlp/")
    assert exported.status_code == 200 and b"get_weather" in exported.content


async def test_a_long_value_is_kept_cut_and_the_exporter_is_told(user, token, settings):
    settings.AGENTLAB_RECEIVER_MAX_VALUE_CHARS = 10
    response = await send(token, encoded(AgentTrace().whole()))
    body = ExportTraceServiceResponse.FromString(response.content)
    assert body.partial_success.rejected_spans == 0
    assert "cut at 10 characters" in body.partial_success.error_message
    run = await Run.objects.aget(pk=(await received(user)).pk)
    assert run.status == "succeeded" and run.final_answer == "It is sunn"
    tool = await run.steps.aget(kind="tool")
    assert tool.text == "sunny, 21 " and "output.value" in tool.meta["otel.cut"]


async def test_traces_past_a_requests_limit_are_refused_as_a_partial_success(user, token,
                                                                              settings):
    settings.AGENTLAB_RECEIVER_MAX_TRACES_PER_REQUEST = 1
    spans = AgentTrace().whole() + AgentTrace().whole()
    body = ExportTraceServiceResponse.FromString((await send(token, encoded(spans))).content)
    assert body.partial_success.rejected_spans == 4
    assert await Run.objects.acount() == 1


async def test_traces_past_the_open_limit_are_refused_and_whole_ones_still_come_in(
        user, token, settings):
    """A trace is open until its root span comes; a user may have so many open at once. One
    that comes whole is never open, so it is taken even at the limit (and no count of the open
    ones is asked for a request of whole traces only)."""
    settings.AGENTLAB_RECEIVER_MAX_OPEN_TRACES = 1
    first, second = AgentTrace(), AgentTrace()
    for agent in (first, second):
        agent.start()
        agent.llm_asks_tool()
    await send(token, encoded(first.ended))  # open: the one place
    body = ExportTraceServiceResponse.FromString(
        (await send(token, encoded(second.ended + AgentTrace().whole()))).content)
    assert body.partial_success.rejected_spans == len(second.ended)
    assert "AGENTLAB_RECEIVER_MAX_OPEN_TRACES" in body.partial_success.error_message
    runs = [r async for r in Run.objects.order_by("pk")]
    assert [r.status for r in runs] == ["running", "succeeded"]


async def test_a_span_after_the_end_or_a_root_after_a_quiet_close_reads_the_run_again(
        user, token):
    agent = AgentTrace()
    agent.start()
    agent.llm_asks_tool()
    agent.tool()
    await send(token, encoded(agent.ended[:1]))
    run = await received(user)
    await sync_to_async(store.close_quiet)(timezone.now() + timedelta(seconds=301))
    assert (await Run.objects.aget(pk=run.pk)).status == "interrupted"
    agent.llm_answers()
    agent.finish()
    await send(token, encoded(agent.ended[2:]))  # the root (and more) after the quiet close
    run = await Run.objects.aget(pk=run.pk)
    assert run.status == "succeeded" and run.error == ""
    assert [s.kind async for s in run.steps.order_by("seq")] == ["llm", "llm"]
    await send(token, encoded(agent.ended[1:2]))  # the tool, late
    run = await Run.objects.aget(pk=run.pk)
    assert [s.kind async for s in run.steps.order_by("seq")] == ["llm", "tool", "llm"]
    assert (run.status, run.tool_calls, run.step_count) == ("succeeded", 1, 3)


@pytest.mark.parametrize("held_here", [True, False], ids=["held-here", "read-back"])
async def test_a_trace_sent_in_many_requests_reads_whole_exactly_as_its_import(
        user, token, held_here):
    """Every field of every step: whether this process held the open trace's spans (its live
    rows renumbered in place) or must read them back (another process took some of them)."""
    held.clear()  # what earlier tests left open
    trace = agent_trace(random.Random(7), "many-requests", 40)
    spans = export_order([trace])
    for part in batches(spans, 7):
        if not held_here:
            held.clear()  # as after a restart, or where another process took the spans before
        await send(token, encode(part))
    run = await received(user)
    _fields, expected = run_from_trace(traces(encode(spans))[trace.hex_id])
    rows = await sync_to_async(lambda: [s.to_record().to_dict()
                                        for s in run.steps.order_by("seq")])()
    for got, want in zip(rows, [s.to_dict() for s in expected], strict=True):
        # a date column keeps microseconds: the same instant, not always the same float
        assert got.pop("started_at") == pytest.approx(want.pop("started_at"), abs=1e-6)
        assert got == want, {k: (got[k], want[k]) for k in got if got[k] != want[k]}
    run = await Run.objects.aget(pk=run.pk)
    assert (run.status, run.step_count, run.llm_calls, run.tool_calls) == (
        "succeeded", 39, 13, 13)
    assert held.spans_held() == 0  # taken by the whole read: nothing left behind


async def test_a_watched_trace_is_stored_a_piece_at_a_time_and_ends_as_its_import(
        user, token, settings):
    """With a page watching, a big request is stored (and shown) a piece at a time
    (agentlab/receiver/chunks.py): each span's step comes once, in the order the spans came,
    placeholders before the children that came first, and the run reads whole as its import;
    a retry of a request stores nothing again."""
    settings.AGENTLAB_RECEIVER_CHUNK_SPANS = 4
    trace = agent_trace(random.Random(11), "pieces", 40)
    spans = export_order([trace])
    await send(token, encode(spans[:2]))
    run = await received(user)
    comm = await connect(run.pk, user)
    try:
        backfill = await synced(comm)
        await send(token, encode(spans[2:20]))
        await send(token, encode(spans[2:20]))  # an exporter's retry
        await send(token, encode(spans[20:]))  # 20 spans, the root last: five pieces
        frames = await frames_until(comm, is_type("final"))
    finally:
        await comm.disconnect()
    steps = [f for f in backfill + frames if f["type"] == "step"]
    done = [f["seq"] for f in steps if f["status"] != "running"]
    assert len(done) == len(set(done)) == 40  # every span's step once (the root's too, live)
    shown: set[int] = set()
    for frame in steps:  # a step's parent (or its placeholder) is on the page before it
        assert frame["parent"] is None or frame["parent"] in shown, frame["seq"]
        shown.add(frame["seq"])
    run = await Run.objects.aget(pk=run.pk)
    _fields, expected = run_from_trace(traces(encode(spans))[trace.hex_id])
    assert await sync_to_async(steps_of)(run) == [
        (s.seq, s.parent, s.kind, s.name, s.status) for s in expected]
    assert (run.status, run.step_count) == ("succeeded", 39)


def test_pieces_cut_only_big_traces_their_root_last_and_only_for_a_watcher(monkeypatch):
    from agentlab.receiver import chunks

    small = [AgentTrace().whole() for _ in range(3)]  # 4 spans each, the root last
    big = export_order([agent_trace(random.Random(3), "big", 11)])
    big = big[-1:] + big[:-1]  # the root first: an exporter's order is not to be relied on
    groups = traces(encode(big))
    groups |= {f"small{n}": traces(encoded(t)).popitem()[1] for n, t in enumerate(small)}
    monkeypatch.setattr(chunks.fanout, "anyone_watching", lambda: False)
    assert chunks.pieces(groups, 4) == [groups]  # nobody to show the first spans to sooner
    monkeypatch.setattr(chunks.fanout, "anyone_watching", lambda: True)
    parts = chunks.pieces(groups, 4)
    assert all(sum(map(len, p.values())) <= 4 for p in parts)
    assert [p[f"small{n}"] for n in range(3) for p in parts if f"small{n}" in p] == [
        groups[f"small{n}"] for n in range(3)]  # a small trace is never cut
    trace_id = next(iter(groups))
    cut = [s for p in parts for s in p.get(trace_id, [])]
    assert sorted(s.span_id for s in cut) == sorted(s.span_id for s in groups[trace_id])
    assert not cut[-1].parent_id and all(s.parent_id for s in cut[:-1])  # the root last
    del groups[trace_id]  # only small traces: one piece (short runs, most of them read whole)
    assert chunks.pieces(groups, 4) == [groups]
