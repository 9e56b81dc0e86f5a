"""Fork in real Chromium against daphne: edit a tool observation on the fork page, the fork runs
(the recorded steps served, the rest live), and the diff of fork vs origin marks the edited step
as the first divergence. Model: the scripted OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import re
import threading
import time

import pytest
from playwright.sync_api import expect

from agentlab.runs.execution import execute_run
from agentlab.runs.snapshot import create_run
from tests.fake_openai import Reply
from traces.models import Run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def record_source(agent, user, fake_llm) -> Run:
    """A finished ReAct run (llm, tool, llm, final), executed in its own thread and loop:
    Playwright's sync API owns this thread's loop."""
    fake_llm.script(Reply(tool_calls=[("calculator", '{"expression": "6*7"}')]),
                    Reply(text="6*7 is 42."))
    run = create_run(agent, user, "What is 6*7?")
    worker = threading.Thread(target=lambda: asyncio.run(execute_run(run)))
    worker.start()
    worker.join(30)
    fake_llm.reset()
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    return run


def wait_finished(pk: int, timeout_s: float = 20) -> Run:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = Run.objects.get(pk=pk)
        if not run.is_active:
            return run
        time.sleep(0.2)
    raise AssertionError(f"run {pk} is still {run.status}")


def test_fork_with_an_edited_observation_then_diff_it_against_its_origin(
        page, live_server_url, agent, user, fake_llm):
    source = record_source(agent, user, fake_llm)
    fake_llm.script(Reply(text="6*7 is 100, the tool says."))
    page.goto(f"{live_server_url}/runs/{source.pk}/fork/2/")
    expect(page.get_by_role("heading", name=re.compile("Fork from step 2"))).to_be_visible()
    observation = page.get_by_label("Observation")
    expect(observation).to_have_value("42")
    observation.fill("100")
    page.get_by_role("button", name="Fork and run").click()

    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    fork_pk = int(page.url.rstrip("/").rsplit("/", 1)[1])
    assert fork_pk != source.pk
    fork = wait_finished(fork_pk)
    assert (fork.status, fork.final_answer) == ("succeeded", "6*7 is 100, the tool says.")
    assert (fork.parent_run_id, fork.fork_seq) == (source.pk, 2)
    assert len(fake_llm.requests) == 1  # steps 1 and 2 came from the record

    page.goto(f"{live_server_url}/runs/diff/?a={source.pk}&b={fork_pk}")
    expect(page.locator(".answer-verdict")).to_have_text("Different answers")
    first = page.locator("tr.first-divergence")
    expect(first).to_have_count(1)
    expect(first.locator(".side.left")).to_contain_text("calculator")
    expect(first.locator(".side.left")).to_contain_text("42")
    expect(first.locator(".side.right")).to_contain_text("100")
    page.get_by_role("link", name="Jump to first divergence").click()
    expect(first).to_be_in_viewport()
    # (a missing favicon is the browser's business, a script error is ours)
    assert [e for e in page.js_errors if not e.startswith("Failed to load resource")] == []
