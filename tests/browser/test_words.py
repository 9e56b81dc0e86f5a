"""The words a newcomer reads, in real Chromium: a run's status says what happened ("finished
with an answer", "stopped by a limit", "failed"), a status the page does not know yet still
reads as words, and a paradigm is its display name ("Multi-Agent", never `multi_agent`) on the
runs list, the trace page, the home page and the chat page."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.factories import make_run

pytestmark = [pytest.mark.browser]


def test_statuses_and_paradigms_in_words(page, live_url, user):
    runs = {status: make_run(user, status=status, paradigm="multi_agent",
                             input=f"A question that ended {status}")
            for status in ("succeeded", "stopped", "failed", "some_new_state")}
    page.goto(f"{live_url}/runs/")
    for status, words in (("succeeded", "finished with an answer"),
                          ("stopped", "stopped by a limit"), ("failed", "failed"),
                          ("some_new_state", "some new state")):
        row = page.locator(f'tr[data-run="{runs[status].pk}"]')
        expect(row.locator(".status")).to_have_text(words)
        expect(row).to_contain_text("Multi-Agent")
        expect(row).not_to_contain_text("multi_agent")
    expect(page.locator("select[name=paradigm] option[value=multi_agent]")).to_have_text(
        "Multi-Agent")

    page.goto(f"{live_url}/runs/{runs['stopped'].pk}/")
    meta = page.locator("#run-head .run-meta")
    expect(meta.locator(".status")).to_have_text("stopped by a limit")
    assert "limit" in meta.locator(".status").get_attribute("title")
    expect(meta.locator(".pill")).to_have_text("Multi-Agent")

    page.goto(f"{live_url}/")
    expect(page.locator(".recent")).to_contain_text("finished with an answer")
    assert page.js_errors == []
