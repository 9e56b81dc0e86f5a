"""A received trace watched in real Chromium against daphne: an instrumented agent's exporter
(the OpenTelemetry SDK's own, over HTTP) sends spans; the runs list shows the run going, the run
page shows each span as it arrives (children under a placeholder until their parent comes),
and becomes the finished trace by itself when the root span arrives."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from playwright.sync_api import expect

from agentlab.receiver.models import ReceivedTrace
from agentlab.tokens.models import create_token
from tests.otlp_spans import AgentTrace

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_received_agent_shows_live_and_ends_as_its_trace(page, live_url, user):
    token = create_token(user, "agent", "ingest")[1]
    exporter = OTLPSpanExporter(endpoint=f"{live_url}/v1/traces",
                                headers={"Authorization": f"Bearer {token}"})
    agent = AgentTrace()
    agent.start()
    agent.llm_asks_tool()
    exporter.export(agent.ended)
    run = ReceivedTrace.objects.get(user=user).run

    page.goto(f"{live_url}/runs/")
    row = page.locator(f'tr[data-run="{run.pk}"]')
    expect(row).to_contain_text("running")
    page.goto(f"{live_url}/runs/{run.pk}/")
    page.evaluate("window.notReloaded = true")
    expect(page.locator(".live-panel")).to_contain_text("Receiving spans from weather-app")
    steps = page.locator("#steps")
    expect(steps).to_contain_text("(span not arrived yet)")
    expect(steps).to_contain_text("gpt-test")

    agent.tool()
    exporter.export(agent.ended[1:])
    expect(steps).to_contain_text("get_weather")  # arrived live, no reload

    agent.llm_answers()
    agent.finish()
    exporter.export(agent.ended[2:])
    head = page.locator("#run-head")
    expect(head.locator(".run-meta .status")).to_have_text("finished with an answer",
                                                           timeout=20_000)
    expect(head.locator(".answer .text")).to_have_text("It is sunny in Paris.")
    expect(head.locator(".totals")).to_contain_text("LLM calls2")
    expect(page.locator(".live-panel")).to_have_count(0)
    expect(steps).not_to_contain_text("(span not arrived yet)")
    assert page.evaluate("window.notReloaded") is True

    page.goto(f"{live_url}/runs/")
    expect(page.locator(f'tr[data-run="{run.pk}"]')).to_contain_text("Weather in Paris?")


def test_the_runs_list_shows_new_and_ending_runs_without_a_reload(page, live_url, user):
    token = create_token(user, "agent", "ingest")[1]
    exporter = OTLPSpanExporter(endpoint=f"{live_url}/v1/traces",
                                headers={"Authorization": f"Bearer {token}"})
    first = AgentTrace()
    first.start()
    first.llm_asks_tool()
    exporter.export(first.ended)
    page.goto(f"{live_url}/runs/")
    page.evaluate("window.notReloaded = true")
    expect(page.locator("tr[data-run]")).to_have_count(1)

    second = AgentTrace(service="billing-app")
    exporter.export(second.whole())  # a new run, whole at once
    expect(page.locator("tr[data-run]")).to_have_count(2, timeout=10_000)
    run = ReceivedTrace.objects.get(user=user, run__status="running").run
    first.tool()
    first.llm_answers()
    first.finish()
    exporter.export(first.ended[1:])
    expect(page.locator(f'tr[data-run="{run.pk}"]')).to_contain_text("Weather in Paris?",
                                                                    timeout=10_000)
    assert page.evaluate("window.notReloaded") is True
