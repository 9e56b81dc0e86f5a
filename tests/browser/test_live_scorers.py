"""A live scorer's page and the alert banner in real Chromium: the banner that htmx loads into
every page for the user whose runs opened the alert (and not for another user), its link to the
scorer's page, whose charts are drawn and whose figures and scores are those of the runs."""

from __future__ import annotations

import threading

import pytest
from playwright.sync_api import expect

from agentlab.monitors import passes
from agentlab.monitors.models import LiveScorer
from tests.browser_fixtures import log_in
from tests.factories import make_run

pytestmark = [pytest.mark.browser]


def pass_once() -> None:
    """A pass, on a thread of its own as in the server (Playwright's loop runs in this one)."""
    worker = threading.Thread(target=passes.run_once)
    worker.start()
    worker.join(60)


def test_the_banner_leads_to_the_scorers_page(page, live_url, user, other_user):
    live = LiveScorer(name="mentions sun", kind="regex", expected=r"\bsun(ny)?\b",
                      agent_name="Weather agent", key="sun", window=2, alert_on="score",
                      alert_op="below", alert_threshold=0.6)
    live.full_clean()
    live.save()
    for answer in ("It is sunny.", "Rain all day.", "Grey skies."):
        make_run(user, [{"kind": "final", "text": answer, "output": answer}],
                 input=f"Weather? ({answer})")
    pass_once()

    page.goto(f"{live_url}/runs/")
    banner = page.locator(".alert-banner")
    expect(banner).to_contain_text("1 open alert")
    expect(banner).to_contain_text("mentions sun: its rolling average score over the last 2 "
                                   "runs fell below 0.6: 0")
    banner.get_by_role("link", name="mentions sun").click()
    page.wait_for_url(f"{live_url}/scorers/{live.pk}/")
    expect(page.get_by_role("heading", name="mentions sun")).to_be_visible()
    expect(page.locator("#rolling")).to_have_text("0.000")
    expect(page.locator("#chart-rolling")).to_have_attribute("data-drawn", "1")
    expect(page.locator("#chart-days")).to_have_attribute("data-drawn", "1")
    rows = page.locator("#scores tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.first).to_contain_text("Grey skies.")
    expect(rows.first).to_contain_text("0.00 fail")
    expect(rows.last).to_contain_text("1.00 pass")

    page.context.clear_cookies()
    log_in(page, live_url, "bob", "pw-bob-123")
    page.goto(f"{live_url}/runs/")
    expect(page.get_by_role("heading", name="Runs")).to_be_visible()
    page.wait_for_load_state("networkidle")
    expect(page.locator(".alert-banner")).to_have_count(0)
    page.goto(f"{live_url}/scorers/{live.pk}/")
    expect(page.locator("#scores")).to_contain_text("No scores yet.")
