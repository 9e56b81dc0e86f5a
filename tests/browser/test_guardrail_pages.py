"""The pages where guardrail decisions show, in Chromium at desktop and phone width: a real run
on the scripted model (tests/fake_openai.py) whose billing tool and reply carry PII, redacted
by a global guardrail. The run page links to each decision and shows no card number; the
dashboard counts the decisions; the runs list filters by them. Each page is checked like the
tour's (a heading, nothing wider than the window) and photographed (AGENTLAB_TOUR_DIR)."""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.billing import ANSWER, CALL, SECRETS, billing_agent, guardrail, run_to_end
from tests.browser_fixtures import Tour

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def agent(fake_llm, monkeypatch):
    return billing_agent(fake_llm.base_url, monkeypatch)


def test_guardrail_decisions_on_the_run_page_dashboard_and_runs_list(
        page, live_url, user, agent, fake_llm, tmp_path):
    guardrail()
    fake_llm.script(CALL, ANSWER)
    with ThreadPoolExecutor(1) as pool:  # Playwright's sync API keeps a loop in this thread
        run = pool.submit(asyncio.run, run_to_end(agent, user)).result(timeout=60)
    tour = Tour(page, live_url, Path(os.environ.get("AGENTLAB_TOUR_DIR") or tmp_path))

    tour.shoot("guardrail-run", f"/runs/{run.pk}/")
    links = page.locator("#guardrail-decisions a")
    expect(links.first).to_be_visible()
    assert links.count() >= 2
    assert not [s for s in SECRETS if s in page.content()]
    seq = links.first.get_attribute("data-go")
    links.first.click()  # the player goes to that decision's step
    expect(page.locator('input[type="range"]').first).to_have_value(seq)

    tour.shoot("guardrail-dashboard", "/dashboard/")
    expect(page.locator('#guardrails tr[data-guardrail="No PII"]')).to_be_visible()

    tour.shoot("guardrail-runs", "/runs/?guardrail=No+PII&guardrail_action=redact")
    expect(page.locator(f'a[href="/runs/{run.pk}/"]').first).to_be_visible()
    assert tour.problems == []
