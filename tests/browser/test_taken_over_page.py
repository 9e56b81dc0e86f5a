"""A run taken over by another worker, as its trace page shows it, in Chromium at desktop and
phone width: the "taken over" pill on the first new step says from which worker, by which and
after which step. The run is written as a worker leaves it (the step's meta), so this runs on
the default profile too. Checked like the tour's pages and photographed (AGENTLAB_TOUR_DIR)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from agentlab.runs.snapshot import create_run
from tests.browser_fixtures import Tour
from traces.models import Step

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_trace_says_where_another_worker_took_the_run_over(page, live_url, agent,
                                                               user, tmp_path):
    run = create_run(agent, user, "What is 6*7?")
    now = timezone.now()
    note = {"by": "vm:202/88@b.p", "from": "engine:vm:101/77@b.p", "after_seq": 2,
            "at": now.isoformat()}
    for seq, kind, name, meta in [(1, "llm", "Scripted", {}), (2, "tool", "calculator", {}),
                                  (3, "llm", "Scripted", {"taken_over": note}),
                                  (4, "final", "", {})]:
        Step.objects.create(run=run, seq=seq, kind=kind, name=name, started_at=now,
                            duration_ms=5, text="42" if kind != "llm" else "thinking", meta=meta)
    run.status, run.final_answer, run.finished_at = "succeeded", "42", now
    run.save()
    tour = Tour(page, live_url, Path(os.environ.get("AGENTLAB_TOUR_DIR") or tmp_path))
    tour.shoot("taken-over-run", f"/runs/{run.pk}/")
    pill = page.locator('.step[data-seq="3"] .pill.taken-over')
    expect(pill).to_have_text("taken over after #2")  # readable without a hover (phones)
    expect(pill).to_have_attribute("title", "the worker running this run (engine:vm:101/77@b.p) "
                                   "stopped; vm:202/88@b.p continued it from its trace after "
                                   "step 2")
    expect(page.locator(".pill.taken-over")).to_have_count(1)
    assert tour.problems == []
