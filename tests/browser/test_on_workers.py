"""The scale profile in real Chromium: two daphne processes and two `manage.py worker`
processes on one PostgreSQL and one Redis (`python -m pytest -p tests.scale_profile`; skipped
on SQLite). A chat answered on one web process, and a run started in step mode on web A,
watched on web B, resumed from B: the control reaches the worker holding the run, and its
effect reaches both pages. Model: the scripted OpenAI-compatible server (real HTTP from the
workers)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from django.db import connection
from playwright.sync_api import expect

from agentlab.bench.servers import database_url
from tests.browser_fixtures import log_in, run_once_in_step_mode, start_daphne
from tests.fake_openai import Reply
from tests.waiting import wait_until
from tests.worker_pool import Workers

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

@pytest.fixture
def scale(fake_llm, tmp_path) -> Iterator[tuple[str, str]]:
    """Two web processes (daphne, runs on workers) and two workers; the two base URLs."""
    if connection.vendor != "postgresql" or not os.environ.get("REDIS_URL"):
        pytest.skip("the scale profile needs PostgreSQL and Redis: -p tests.scale_profile")
    workers = Workers()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE procrastinate_jobs, procrastinate_events, "
                       "procrastinate_workers CASCADE")
    env = {**workers.env, "ALLOWED_HOSTS": "127.0.0.1,localhost",
           "DJANGO_SETTINGS_MODULE": "agentlab.settings",
           "DATABASE_URL": database_url(connection.settings_dict)}
    webs, urls = [], []
    try:
        workers.start(2)
        for name in ("a", "b"):
            url, web = start_daphne(env, tmp_path / f"daphne-{name}.log")
            webs.append(web)
            urls.append(url)
        wait_until(lambda: workers.registered() >= 2, timeout=60,
                   message="both workers registered")
        yield urls[0], urls[1]
    finally:
        for web in webs:
            web.terminate()
            web.wait(timeout=20)
        workers.stop()


def test_a_run_started_on_one_web_process_is_controlled_from_another(
        scale, playwright_browser, agent, fake_llm, user):
    web_a, web_b = scale
    page_a = playwright_browser.new_page()
    page_b = playwright_browser.new_context().new_page()
    log_in(page_a, web_a, "alice", "pw-alice-123")
    log_in(page_b, web_b, "alice", "pw-alice-123")

    # Chat on web A: the turn's run executes on a worker, its answer streams back to A.
    answer = "Six times seven is forty-two."
    fake_llm.script(Reply(tool_calls=[("calculator", '{"expression": "6*7"}')]),
                    Reply(text=answer))
    page_a.goto(f"{web_a}/chat/")
    page_a.get_by_role("button", name="New conversation with Calc agent").click()
    page_a.get_by_label("Message").fill("What is 6*7?")
    page_a.get_by_role("button", name="Send").click()
    expect(page_a.locator('#turn-1 [data-live="answer"]')).to_have_text(answer, timeout=30_000)

    # A one-off run in step mode, started on A.
    fake_llm.script(Reply(tool_calls=[("calculator", '{"expression": "6*7"}')]),
                    Reply(text="The answer is 42."))
    pending_a = run_once_in_step_mode(page_a, web_a)
    expect(pending_a).to_contain_text("step mode: before the llm call", timeout=30_000)
    run_path = page_a.url.split("?")[0].removeprefix(web_a)

    # Watched on B: the pause and the debug state come from the worker holding the run.
    page_b.goto(f"{web_b}{run_path}")
    pending_b = page_b.locator('[data-live="pending"]')
    expect(pending_b).to_contain_text("step mode: before the llm call")
    box = page_b.get_by_label("Step mode: pause before every LLM call and tool call")
    expect(box).to_be_checked()
    page_b.locator("details.live-debug").evaluate("d => d.open = true")
    box.uncheck()
    pending_b.get_by_role("button", name="Resume").click()
    for page in (page_a, page_b):
        expect(page.locator('[data-live="answer"]')).to_have_text("The answer is 42.",
                                                                  timeout=30_000)
        expect(page.locator('[data-live="status"]')).to_have_text("finished with an answer")
