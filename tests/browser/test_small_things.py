"""Small things a newcomer notices, in real Chromium: step facts read as words and durations
("first token 13.30 s", not "ttft_ms 1.33e+04"), a failed answer's raw JSON is folded under its
text, the dashboard shows a tool the model invented as an unknown tool, and an imported run
shows when it originally ran."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from playwright.sync_api import expect

from tests.factories import make_run

pytestmark = [pytest.mark.browser]


def test_facts_failures_unknown_tools_and_when_a_run_ran(page, live_url, user):
    ran = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    run = make_run(user, [
        {"kind": "llm", "name": "m", "meta": {"ttft_ms": 13300.0, "attempts": 1}},
        {"kind": "tool", "name": "magic_wand", "status": "error", "text": "unknown tool"},
        {"kind": "final", "status": "error", "text": "The model server went away.",
         "output": {"error": "The model server went away.", "status": "failed"}},
    ], status="failed", error="The model server went away.", started_at=ran)
    page.goto(f"{live_url}/runs/{run.pk}/")
    facts = page.locator("#step-1 .facts")
    expect(facts).to_contain_text("first token 13.30 s")
    expect(facts).not_to_contain_text("ttft_ms")
    final = page.locator("#step-3")
    expect(final.locator(".text-field")).to_contain_text("The model server went away.")
    expect(final.locator("details.payload").first).not_to_have_attribute("open", "")
    expect(final.locator(".payload .hl").first).to_be_hidden()  # the JSON is folded away
    expect(page.locator("#run-head .run-meta")).to_contain_text("2025-01-02")

    page.goto(f"{live_url}/dashboard/?period=all")
    row = page.locator('tr[data-tool="magic_wand"]')
    expect(row).to_contain_text("unknown tool magic_wand")
    assert page.js_errors == []
