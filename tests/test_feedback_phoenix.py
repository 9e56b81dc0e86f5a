"""Feedback reaches the real Phoenix as span annotations (agentlab/feedback/phoenix.py): a run
exported live, then thumbs, a value with a note and a note given on its page, one edited, one
deleted; read back through Phoenix's REST API on the spans the live export made."""

from __future__ import annotations

import time
import urllib.parse
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.test import Client

from agentlab.feedback import phoenix as annotations
from agentlab.feedback.models import Feedback, FeedbackKey
from tests.factories import make_run
from traces.models import Run
from traces.otel import ids, live
from traces.otel.stream import LiveSink

PROJECT = "agentlab-feedback"
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def to_phoenix(phoenix, settings, monkeypatch):
    settings.AGENTLAB_OTEL_LIVE = True
    settings.AGENTLAB_OTEL_PROJECT = PROJECT
    settings.AGENTLAB_ANNOTATIONS_URL = ""  # derived from the OTLP endpoint, as in production
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix.url)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    live.reset()
    yield phoenix
    live.reset()


async def _feed(run: Run) -> None:
    sink = await sync_to_async(LiveSink.for_run)(run)
    async for step in run.steps.order_by("seq"):
        await sink.step(step.to_record())
    await sink.status(run.status, {"answer": run.final_answer, "error": run.error})


def annotations_of(server, spans: list[str], want: int, timeout_s: float = 30) -> list[dict]:
    query = urllib.parse.urlencode([("span_ids", s) for s in spans] + [("limit", 100)])
    deadline = time.monotonic() + timeout_s
    while True:
        found = server.get(f"/v1/projects/{PROJECT}/span_annotations?{query}")["data"]
        if len(found) == want or time.monotonic() > deadline:
            return found
        time.sleep(0.3)


def by_name(found: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(a["span_id"], a["name"]): a for a in found}


@pytest.mark.django_db(transaction=True)
def test_feedback_given_on_the_page_arrives_in_phoenix_on_the_runs_spans(to_phoenix, user):
    run = make_run(user)
    async_to_sync(_feed)(Run.objects.get(pk=run.pk))
    assert live.flush() and to_phoenix.spans(PROJECT, 9)
    key = FeedbackKey.objects.create(name="relevance", kind="numeric", minimum=1, maximum=5)
    client = Client()
    client.force_login(user)
    client.post(f"/feedback/runs/{run.pk}/3/thumbs/", {"value": "down"}, **HTMX)
    client.post(f"/feedback/runs/{run.pk}/2/thumbs/", {"value": "up"}, **HTMX)
    client.post(f"/feedback/runs/{run.pk}/0/give/",
                {f"key-{key.pk}": "4", "note": "cites no source"}, **HTMX)
    client.post(f"/feedback/runs/{run.pk}/8/give/", {"note": "the answer is right"}, **HTMX)
    relevance = Feedback.objects.get(name="relevance")
    client.post(f"/feedback/{relevance.pk}/edit/", {"value": "2", "note": "wrong city"}, **HTMX)
    client.post(f"/feedback/runs/{run.pk}/2/thumbs/", {"value": "up"}, **HTMX)  # taken back
    assert annotations.flush() and annotations.STATS.failed == 0, annotations.STATS.last_error

    span = {seq: ids.hex_span(ids.span_id(run.pk, seq)) for seq in (0, 2, 3, 8)}
    found = by_name(annotations_of(to_phoenix, list(span.values()), want=4))
    assert set(found) == {(span[3], "thumbs"), (span[0], "relevance"), (span[0], "note"),
                          (span[8], "note")}
    thumb = found[(span[3], "thumbs")]
    assert thumb["annotator_kind"] == "HUMAN" and thumb["result"]["label"] == "down"
    assert thumb["result"]["score"] == 0 and thumb["metadata"]["author"] == "alice"
    rated = found[(span[0], "relevance")]  # the edit updated the one annotation
    assert (rated["result"]["score"], rated["result"]["explanation"]) == (2, "wrong city")
    assert found[(span[8], "note")]["result"]["explanation"] == "the answer is right"
    # The run's root span is the one Phoenix shows for the trace.
    root = [s for s in to_phoenix.spans(PROJECT, 9) if s["context"]["span_id"] == span[0]]
    assert root and root[0]["parent_id"] is None
