"""Issue 38, the chat page as a newcomer meets it: a message typed while an answer runs, the
first message naming the conversation, a long paste told its limit (server side; the browser
side is tests/browser/test_newcomer.py)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from agentlab.asgi import application
from tests.fake_openai import Reply
from tests.sockets import headers, run_finished
from traces.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


async def test_the_first_message_names_the_conversation_in_its_turn_frame(
        conversation, user, fake_llm):
    fake_llm.script(Reply(text="Hello."), Reply(text="Again."))
    hdrs = await sync_to_async(headers)(user)
    comm = WebsocketCommunicator(application, f"/ws/chat/{conversation.pk}/", headers=hdrs)
    assert (await comm.connect())[0]
    await comm.send_json_to({"action": "start", "message": "  Plan   a trip to Rome  "})
    turn = await comm.receive_json_from()
    assert (turn["type"], turn["title"]) == ("turn", "Plan a trip to Rome")
    await run_finished(turn["run"])
    await comm.send_json_to({"action": "start", "message": "And Paris?"})
    second = await comm.receive_json_from()
    assert second["title"] == "Plan a trip to Rome"  # named once, by the first message
    await run_finished(second["run"])
    await comm.disconnect()


def test_the_chat_page_says_the_limit_and_why_send_waits_instead_of_cutting(
        client, conversation, user, settings):
    settings.AGENTLAB_MAX_MESSAGE_CHARS = 20_000
    client.force_login(user)
    page = client.get(f"/chat/{conversation.pk}/").content.decode()
    form = page[page.index('data-live="chat-form"'):]
    form = form[:form.index("</form>")]
    # No maxlength: Chromium cuts a 50,000-character paste to it without a word.
    assert "maxlength" not in form and 'data-max-chars="20000"' in form
    assert "At most 20,000 characters." in form
    assert "Send waits until the answer above has finished" in form
    index = client.get("/chat/").content.decode()
    assert "maxlength" not in index and "At most 20,000 characters" in index


def test_a_one_off_question_over_the_limit_is_refused_with_the_limit(client, user, agent,
                                                                      settings):
    settings.AGENTLAB_MAX_MESSAGE_CHARS = 20_000
    client.force_login(user)
    page = client.post("/chat/run/", {"agent": agent.pk, "question": "x" * 50_000},
                       follow=True).content.decode()
    assert "The question is 50,000 characters; a question may have at most 20,000." in page
    assert not Run.objects.exists()
