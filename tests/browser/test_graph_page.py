"""The graph of a run in real Chromium: opened from the run page at the replay's step, the
scrubber (keys, slider) walks the path over the graph, a click on a node lists its steps and a
step's link opens it in the trace. The run is a debate the real paradigm recorded on scripted
models (tests/graph_runs.py)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests import graph_runs

pytestmark = [pytest.mark.browser]


def at(page) -> tuple[list[str], list[str]]:
    nodes = page.locator(".g-node.at").evaluate_all("els => els.map(e => e.dataset.key)")
    edges = page.locator(".g-edge.at").evaluate_all(
        "els => els.map(e => e.dataset.source + ' > ' + e.dataset.target)")
    return nodes, edges


def test_the_scrubber_walks_the_graph_and_a_node_filters_the_steps(page, live_url, user):
    run = graph_runs.record(user, graph_runs.debate_steps(), agent_name="Debate team")
    page.goto(f"{live_url}/runs/{run.pk}/")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    page.wait_for_url(re.compile(r"\?step=2$"))
    page.click("#graph-link")
    page.wait_for_url(re.compile(rf"/runs/{run.pk}/graph/\?step=2$"))
    expect(page.locator("svg.run-graph .g-node")).to_have_count(5)
    # Step 2 is Ann's call to the model: the model's node, and the edge from Ann.
    assert at(page) == (["model:scripted-model"], ["agent:Ann > model:scripted-model"])

    page.keyboard.press("ArrowRight")  # step 3: Bob's turn, given by the run's own agent
    page.wait_for_url(re.compile(r"\?step=3$"))
    expect(page.locator(".g-node.at")).to_have_attribute("data-key", "agent:Bob")
    assert at(page) == (["agent:Bob"], ["agent:agent > agent:Bob"])
    assert page.locator("#graph-step-label").inner_text() == "step 3 / 11"
    page.locator("#graph-slider").evaluate(
        "el => { el.value = '10'; el.dispatchEvent(new Event('input', {bubbles: true})); }")
    expect(page.locator(".g-edge.at")).to_have_attribute("data-source", "agent:judge")
    expect(page.locator("#graph-trace-link")).to_have_attribute(
        "href", f"/runs/{run.pk}/?step=10")

    # A click on Ann's node lists her steps; one of them opens in the trace.
    page.locator('.g-node[data-key="agent:Ann"]').click()
    page.wait_for_url(re.compile(r"node=agent%3AAnn"))
    listed = page.locator("#node-steps li a")
    assert listed.all_inner_texts() == ["#1", "#2", "#5", "#6"]
    listed.nth(2).click()
    page.wait_for_url(re.compile(rf"/runs/{run.pk}/\?step=5$"))
    expect(page.locator(".step.current")).to_have_attribute("data-seq", "5")
    assert page.js_errors == []
