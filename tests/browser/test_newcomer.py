"""Issue 38 in real Chromium: a message typed while an answer runs is kept (Send waits and says
why, then sends it), a blank message and an over-long paste are told so, the first message names
the conversation; on a phone the home page's "Try it" buttons are in view and the runs list
says that it scrolls sideways."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.fake_openai import Reply

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}


def test_a_message_typed_while_an_answer_runs_waits_and_is_sent_after(
        page, live_url, agent, fake_llm):
    slow = "Forty-two, and here is why: six sevens make forty-two, as everyone knows."
    fake_llm.script(Reply(text=slow, chunk_delay_s=0.15), Reply(text="Eighty-four."))
    page.goto(f"{live_url}/chat/")
    page.get_by_role("button", name="New conversation with Calc agent").click()
    box, send = page.get_by_label("Message"), page.get_by_role("button", name="Send")
    error = page.locator('.chat-form [data-live="error"]')
    expect(send).to_be_enabled()

    box.fill("   ")  # only spaces: said, not silently ignored
    send.click()
    expect(error).to_have_text("Type a message first: this one is empty or only spaces.")

    box.fill("x" * 50_000)  # a long paste is kept whole and told the limit
    assert len(box.input_value()) == 50_000
    expect(page.locator('[data-live="count"]')).to_have_text(
        "This message is 50,000 characters: a message may have at most 20,000. "
        "Shorten it to send it.")
    expect(send).to_be_disabled()

    box.fill("What is 6*7?")
    expect(send).to_be_enabled()
    send.click()
    expect(page.locator("#turn-1 .from-user")).to_have_text("What is 6*7?")
    expect(box).to_have_value("")
    expect(error).to_be_hidden()  # the old error went with the message that was sent
    # The first message names the conversation at once, without a reload.
    expect(page.locator('input[name="title"]')).to_have_value("What is 6*7?")
    assert page.title().startswith("What is 6*7?")

    # While the reply streams, the activity line counts its tokens (not "waiting for the reply").
    activity = page.locator('#turn-1 [data-live="activity"]')
    expect(activity).to_contain_text("tokens so far")
    expect(activity).not_to_contain_text("waiting for the reply")
    box.fill("And 12*7?")  # typed while the first answer streams
    expect(send).to_be_disabled()
    expect(page.locator('[data-live="wait"]')).to_be_visible()
    expect(page.locator("#turn-1 [data-live=answer]")).to_have_text(slow)
    expect(send).to_be_enabled()
    expect(page.locator('[data-live="wait"]')).to_be_hidden()
    expect(box).to_have_value("And 12*7?")  # kept
    expect(error).to_be_hidden()
    send.click()
    expect(page.locator("#turn-2 .from-user")).to_have_text("And 12*7?")
    expect(page.locator("#turn-2 [data-live=answer]")).to_have_text("Eighty-four.")
    expect(error).to_be_hidden()


def test_on_a_phone_home_shows_try_it_and_the_runs_list_says_it_scrolls(page, live_url, user):
    from agentlab.defaults import load_defaults
    from tests.factories import make_run

    load_defaults()
    for _ in range(3):
        make_run(user)
    page.set_viewport_size(PHONE)
    page.goto(f"{live_url}/")
    demos = page.get_by_role("button", name="Run the demo question of ReAct (JSON)")
    expect(demos).to_be_visible()
    for button in page.locator("td.actions button").all():
        box = button.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], box
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]

    page.goto(f"{live_url}/runs/")
    expect(page.locator(".scroll-cue")).to_be_visible()
    table = page.locator("table.grid.runs")
    assert table.evaluate("t => t.scrollWidth > t.clientWidth")  # there is more to the side
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    page.set_viewport_size({"width": 1280, "height": 900})
    expect(page.locator(".scroll-cue")).to_be_hidden()  # a desktop sees every column
