"""Chat: conversation pages (own only), rename/delete, one-off runs, and turns started over
/ws/chat/<id>/ whose earlier turns become the run's history. The model is the scripted
OpenAI-compatible server (tests/fake_openai.py)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from agentlab.asgi import application
from agentlab.chat.models import ChatTurn, Conversation
from agentlab.chat.turns import history_of
from tests.fake_openai import Reply
from tests.sockets import headers, run_finished
from traces.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


def test_index_lists_agents_and_only_my_conversations(client, user, other_user, agent):
    Conversation.objects.create(user=user, agent=agent, title="Mine about sums")
    Conversation.objects.create(user=other_user, agent=agent, title="Bob's secret")
    client.force_login(user)
    page = client.get("/chat/").content.decode()
    assert "Calc agent" in page and "Mine about sums" in page and "Bob's secret" not in page


def test_new_rename_delete_and_another_users_conversation_is_a_404(
        client, user, other_user, agent):
    client.force_login(user)
    response = client.post("/chat/new/", {"agent": agent.pk})
    conv = Conversation.objects.get()
    assert response.url == f"/chat/{conv.pk}/" and conv.user == user
    assert "Ask Calc agent something" in client.get(response.url).content.decode()
    client.post(f"/chat/{conv.pk}/rename/", {"title": "  Sums   and products "})
    conv.refresh_from_db()
    assert conv.title == "Sums and products"
    client.force_login(other_user)
    assert client.get(f"/chat/{conv.pk}/").status_code == 404
    assert client.post(f"/chat/{conv.pk}/rename/", {"title": "x"}).status_code == 404
    assert client.post(f"/chat/{conv.pk}/delete/").status_code == 404
    client.force_login(user)
    assert client.post(f"/chat/{conv.pk}/delete/").url == "/chat/"
    assert not Conversation.objects.exists()


def test_a_one_off_run_is_queued_for_its_live_page(client, user, agent):
    client.force_login(user)
    response = client.post("/chat/run/", {"agent": agent.pk, "question": "What is 6*7?",
                                          "step_mode": "on"})
    run = Run.objects.get()
    assert run.status == "queued" and run.input == "What is 6*7?" and run.user == user
    assert response.url == f"/chat/runs/{run.pk}/?start=1&step_mode=1"
    page = client.get(response.url).content.decode()
    assert f'ws-connect="/ws/runs/{run.pk}/"' in page and 'data-autostart="1"' in page
    assert 'name="step_mode" checked' in page
    client.logout()
    assert client.get(response.url).status_code == 302  # login first


async def chat_socket(conversation, user) -> WebsocketCommunicator:
    hdrs = await sync_to_async(headers)(user)
    comm = WebsocketCommunicator(application, f"/ws/chat/{conversation.pk}/", headers=hdrs)
    assert (await comm.connect())[0]
    return comm


async def test_turns_carry_the_conversation_so_far(conversation, user, fake_llm):
    fake_llm.script(Reply(text="Hello Alice."), Reply(text="Your name is Alice."))
    comm = await chat_socket(conversation, user)
    await comm.send_json_to({"action": "start", "message": "Hi, I am Alice."})
    turn = await comm.receive_json_from()
    assert turn["type"] == "turn" and turn["position"] == 1
    assert f'ws-connect="/ws/runs/{turn["run"]}/"' in turn["html"] and "Hi, I am Alice." in turn[
        "html"]
    await comm.send_json_to({"action": "start", "message": "too soon"})
    assert (await comm.receive_json_from())["error"] == "the previous answer is still running"
    await run_finished(turn["run"])
    await comm.send_json_to({"action": "start", "message": "What is my name?"})
    second = await comm.receive_json_from()
    await run_finished(second["run"])
    run = await Run.objects.aget(pk=second["run"])
    assert run.history == [{"role": "user", "content": "Hi, I am Alice."},
                           {"role": "assistant", "content": "Hello Alice."}]
    sent = fake_llm.requests[1]["messages"]
    assert [m["content"] for m in sent if m["role"] != "system"] == [
        "Hi, I am Alice.", "Hello Alice.", "What is my name?"]
    conv = await Conversation.objects.aget(pk=conversation.pk)
    assert conv.title == "Hi, I am Alice."
    assert await ChatTurn.objects.filter(conversation=conv).acount() == 2
    await comm.disconnect()


async def test_chat_socket_refuses_others_and_bad_messages(conversation, user, other_user):
    comm = await chat_socket(conversation, other_user)
    await comm.receive_json_from()
    assert await comm.receive_output() == {"type": "websocket.close", "code": 4403}
    comm = await chat_socket(conversation, user)
    await comm.send_json_to({"action": "start", "message": "   "})
    assert "message" in (await comm.receive_json_from())["error"]
    await comm.disconnect()


async def test_a_message_is_text_measured_without_its_outer_spaces_up_to_the_limit(
        conversation, user, settings, fake_llm):
    settings.AGENTLAB_MAX_MESSAGE_CHARS = 12
    fake_llm.script(Reply(text="Forty-two."))
    comm = await chat_socket(conversation, user)
    for bad in (42, None, ["What is 6*7?"]):
        await comm.send_json_to({"action": "start", "message": bad})
        error = await comm.receive_json_from()
        assert (error["type"], error["error"]) == (
            "error", '"message" must be the text of your question')
    await comm.send_json_to({"action": "start", "message": "What is 6*7?!"})  # 13 characters
    assert (await comm.receive_json_from())["error"] == (
        "the message is 13 characters; a message may have at most 12")
    assert not await ChatTurn.objects.aexists()
    # Exactly the limit once the spaces around it are gone: accepted, and stored without them.
    await comm.send_json_to({"action": "start", "message": "  What is 6*7?  "})
    turn = await comm.receive_json_from()
    assert (turn["type"], turn["position"]) == ("turn", 1)
    await run_finished(turn["run"])
    run = await Run.objects.aget(pk=turn["run"])
    assert (run.input, run.final_answer) == ("What is 6*7?", "Forty-two.")
    await comm.disconnect()


def test_history_skips_turns_without_an_answer(conversation, user, agent):
    from agentlab.runs.snapshot import create_run

    turns = [("a?", "A.", "succeeded"), ("b?", "", "succeeded"),
             ("too long?", "I stopped before finding an answer (…)", "failed"),
             ("c?", "C.", "succeeded")]
    for position, (question, answer, status) in enumerate(turns, 1):
        run = create_run(agent, user, question)
        Run.objects.filter(pk=run.pk).update(final_answer=answer, status=status)
        ChatTurn.objects.create(conversation=conversation, run=run, position=position)
    assert [m["content"] for m in history_of(conversation)] == ["a?", "A.", "c?", "C."]



def test_a_conversation_shows_each_answer_with_its_folded_steps_and_trace_link(
        client, conversation, user, agent):
    from django.utils import timezone

    from agentlab.runs.snapshot import create_run
    from traces.models import Step

    run = create_run(agent, user, "What is 6*7?")
    Run.objects.filter(pk=run.pk).update(final_answer="It is 42.", status="succeeded")
    Step.objects.create(run=run, seq=1, kind="tool", name="calculator", text="42",
                        input={"expression": "6*7"}, started_at=timezone.now())
    ChatTurn.objects.create(conversation=conversation, run=run, position=1)
    client.force_login(user)
    page = client.get(f"/chat/{conversation.pk}/").content.decode()
    assert "It is 42." in page and f'href="/runs/{run.pk}/"' in page
    steps = page[page.index("<details class=\"turn-steps\">"):]
    assert "<summary>Steps behind this answer</summary>" in steps and 'data-seq="1"' in steps
    assert "calculator" in steps
    assert f'ws-connect="/ws/runs/{run.pk}/"' not in page  # a finished turn opens no socket
