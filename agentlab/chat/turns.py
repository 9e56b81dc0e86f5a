"""Chat turns: each a run whose history is the conversation's earlier turns. Sync ORM functions,
with async wrappers for the chat consumer."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from django.db import transaction
from django.template.loader import render_to_string

from agentlab.chat.models import ChatTurn, Conversation
from agentlab.runs import start
from agentlab.runs.control import ControlError
from traces.schema import ACTIVE_STATUSES, ANSWERED_STATUSES

TITLE_CHARS = 80


def history_of(conversation: Conversation) -> list[dict[str, str]]:
    """Earlier turns as chat messages. Only answered turns count: a failed run's text is the
    runtime's "I stopped before…", and its question (maybe one the model could not read at all)
    must not be sent again with every later message."""
    messages: list[dict[str, str]] = []
    for turn in conversation.turns.select_related("run"):
        if turn.run.status in ANSWERED_STATUSES and turn.run.final_answer:
            messages += [{"role": "user", "content": turn.run.input},
                         {"role": "assistant", "content": turn.run.final_answer}]
    return messages


def add_turn_now(conversation_id: int, message: str) -> ChatTurn:
    """A queued run for `message` with the conversation so far, and its turn. ControlError
    while the previous turn runs; RunLimit when the owner has as many runs going as they may."""
    with transaction.atomic():
        conversation = Conversation.objects.select_related("agent", "user").get(
            pk=conversation_id)
        if conversation.agent is None:
            raise ControlError("the agent of this conversation was deleted; start a new one")
        if busy_now(conversation_id):
            raise ControlError("the previous answer is still running")
        try:  # claimed by this process at once: the chat socket submits it
            run = start.start_run(conversation.user, conversation.agent, message,
                                  history=history_of(conversation), claim=True)
        except start.RunLimit:
            raise
        except ValueError as exc:  # an agent whose configuration cannot run
            raise ControlError(f"the agent cannot run: {exc}") from None
        position = conversation.turns.count() + 1
        turn = ChatTurn.objects.create(conversation=conversation, run=run, position=position)
        if not conversation.title:
            # The question as the guardrails left it, like the run's own.
            conversation.title = " ".join(run.input.split())[:TITLE_CHARS]
        conversation.save()  # bumps `updated`: the conversation moves up the list
    return turn


def turn_context(turn: ChatTurn) -> dict[str, Any]:
    return {"turn": turn, "run": turn.run, "live": turn.run.status in ACTIVE_STATUSES}


add_turn = database_sync_to_async(add_turn_now)


def busy_now(conversation_id: int) -> bool:
    return ChatTurn.objects.filter(conversation_id=conversation_id,
                                   run__status__in=ACTIVE_STATUSES).exists()


@database_sync_to_async
def turn_html(turn: ChatTurn) -> str:
    return render_to_string("chat/_turn.html", turn_context(turn))
