"""Chat in real Chromium (Playwright, Debian's /usr/bin/chromium) against daphne: the answer's
tokens stream in, the steps behind it fold out, the turn links to its trace. The model is the
scripted OpenAI-compatible server (tests/fake_openai.py) behind a model profile."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.fake_openai import Reply

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_chat_streams_the_answer_and_folds_out_its_steps(page, live_url, agent, fake_llm):
    answer = "Six times seven is forty-two, as the calculator says."
    fake_llm.script(Reply(tool_calls=[("calculator", '{"expression": "6*7"}')]),
                    Reply(text=answer, chunk_delay_s=0.05))
    page.goto(f"{live_url}/chat/")
    page.get_by_role("button", name="New conversation with Calc agent").click()
    expect(page.get_by_text("Ask Calc agent something")).to_be_visible()
    page.get_by_label("Message").fill("What is 6*7?")
    send = page.get_by_role("button", name="Send")
    expect(send).to_be_enabled()
    send.click()
    turn = page.locator("#turn-1")
    expect(turn.locator(".from-user")).to_have_text("What is 6*7?")
    stream = turn.locator('[data-live="stream"]')
    expect(stream).to_contain_text("Six times")  # tokens arrive before the answer is done
    streamed = stream.inner_text()
    assert answer.startswith(streamed) and streamed != answer
    expect(turn.locator('[data-live="answer"]')).to_have_text(answer)
    expect(stream).to_be_hidden()
    expect(turn.locator('[data-live="status"]')).to_have_text("finished with an answer")
    steps = turn.locator(".turn-steps")
    expect(steps.locator("[data-seq]").first).to_be_hidden()  # folded
    steps.get_by_text("Steps behind this answer").click()
    expect(steps.locator('[data-seq="2"]')).to_contain_text("calculator")
    expect(steps.locator("[data-seq]")).to_have_count(4)
    trace = turn.get_by_role("link", name=re.compile(r"trace of run \d+"))
    href = trace.get_attribute("href")
    page.reload()  # the finished turn is rendered by the server the same way
    expect(page.locator("#turn-1 [data-live=answer]")).to_have_text(answer)
    page.goto(live_url + href)
    expect(page.get_by_text("What is 6*7?").first).to_be_visible()
    assert page.js_errors == []
