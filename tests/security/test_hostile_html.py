"""Hostile HTML and script in everything a model, a tool, a user or a bundle can write, in real
Chromium: on every page that shows it and in a live frame, it stays text. No element is
injected, no dialog opens, no script runs.

Escaping is checked on its own (no injected element, the payload readable as text), not only
through the Content-Security-Policy, which would also block an inline handler: the browser
fixture fails the test on any CSP violation or script error besides.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest
from playwright.sync_api import expect

from agentlab.chat.models import ChatTurn, Conversation
from agentlab.compare.models import Comparison, ComparisonEntry
from tests.factories import make_run
from tests.fake_openai import Reply

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Each piece would run script or add an element if it reached the page as HTML.
PAYLOAD = ('<img src=x class=pwn onerror="window.__pwned=1;alert(1)">'
           '<script>window.__pwned=2</script><svg class=pwn onload=alert(3)>'
           '"></script><b class=pwn>bold</b><a class=pwn href="javascript:alert(4)">x</a>')
SHOWN = '<img src=x class=pwn onerror="window.__pwned=1;alert(1)">'  # as the user reads it


@pytest.fixture
def user(django_user_model):  # the browser logs in through the form: it needs a password
    return django_user_model.objects.create_user(username="alice", password="pw-alice-123")


def hostile_run(user, **fields):
    steps = [
        {"kind": "llm", "name": PAYLOAD, "role": PAYLOAD,
         "input": {"messages": [{"role": "user", "content": PAYLOAD}]},
         "output": {"text": PAYLOAD, "tool_calls": [{"name": PAYLOAD, "arguments": {"q": PAYLOAD},
                                                     "error": PAYLOAD}]},
         "text": PAYLOAD, "meta": {PAYLOAD: PAYLOAD}},
        {"kind": "tool", "name": PAYLOAD, "input": {"sql": PAYLOAD, "q": PAYLOAD},
         "output": {"observation": PAYLOAD, "error": PAYLOAD}, "text": PAYLOAD,
         "status": "error", "meta": {"traceback": PAYLOAD}},
        {"kind": "final", "text": PAYLOAD, "output": PAYLOAD},
    ]
    snapshot = {"paradigm": "react", "profiles": {"default": {
        "name": PAYLOAD, "model": PAYLOAD, "base_url": "http://127.0.0.1:9/v1"}}}
    return make_run(user, steps, input=PAYLOAD, agent_name=PAYLOAD, error=PAYLOAD,
                    final_answer=PAYLOAD, agent_snapshot=snapshot, **fields)


def assert_inert(page) -> None:
    page.wait_for_load_state("networkidle")
    for details in page.locator("details").all()[:40]:  # folded payloads load when opened
        if details.is_visible():
            details.evaluate("d => { d.open = true; d.dispatchEvent(new Event('toggle')); }")
    page.wait_for_load_state("networkidle")
    assert page.locator(".pwn").count() == 0, "an element of the payload reached the page"
    assert page.evaluate("window.__pwned") is None
    assert SHOWN in page.locator("body").inner_text()


@pytest.fixture
def dialogs(page):
    opened: list[str] = []
    page.on("dialog", lambda dialog: (opened.append(dialog.message), dialog.dismiss()))
    yield opened
    assert opened == [], f"a dialog opened: {opened}"


def test_every_page_shows_a_hostile_run_as_text(page, live_url, user, dialogs):
    run, other = hostile_run(user), hostile_run(user)
    conversation = Conversation.objects.create(user=user, title=PAYLOAD)
    ChatTurn.objects.create(conversation=conversation, run=run, position=1)
    comparison = Comparison.objects.create(user=user, question=PAYLOAD, title=PAYLOAD)
    for position, row in enumerate((run, other)):
        ComparisonEntry.objects.create(comparison=comparison, position=position, run=row)
    # Pages that show the run's text, then lists that show names and titles (clipped).
    for path in (f"/runs/{run.pk}/", f"/runs/{run.pk}/?step=2",
                 f"/runs/diff/?a={run.pk}&b={other.pk}", f"/chat/{conversation.pk}/",
                 f"/compare/{comparison.pk}/", f"/runs/{run.pk}/fork/2/",
                 f"/runs/{run.pk}/steps/1/playground/"):
        page.goto(live_url + path)
        assert_inert(page)
    for path in ("/", f"/runs/?q={quote(PAYLOAD[:20])}", "/chat/", "/compare/",
                 "/dashboard/?period=all"):
        page.goto(live_url + path)
        page.wait_for_load_state("networkidle")
        assert page.locator(".pwn").count() == 0, path
        assert page.evaluate("window.__pwned") is None, path


def test_a_hostile_answer_streamed_live_stays_text(page, live_url, calc_agent, fake_llm,
                                                   dialogs):
    fake_llm.script(Reply(tool_calls=[("calculator", '{"expression": "6*7"}')]),
                    Reply(text=PAYLOAD, chunk_delay_s=0.01))
    page.goto(f"{live_url}/chat/")
    page.get_by_role("button", name="New conversation with Calc agent").click()
    page.get_by_label("Message").fill(PAYLOAD)
    page.get_by_role("button", name="Send").click()
    turn = page.locator("#turn-1")
    expect(turn.locator('[data-live="status"]')).to_have_text("finished with an answer")
    turn.get_by_text("Steps behind this answer").click()
    assert_inert(page)
    expect(turn.locator('[data-live="answer"]')).to_contain_text(SHOWN)
