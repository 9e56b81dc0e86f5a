"""Creating runs from the browser: chat turns (earlier turns are the run's history) and queued
runs a run page starts. Sync ORM functions, with async wrappers for the consumers."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from django.db import transaction
from django.template.loader import render_to_string

from agentlab.chat.models import ChatTurn, Conversation
from agentlab.live import ControlError
from agentlab.runner import create_run
from traces.models import ACTIVE_STATUSES, Run
from traces.workers import worker_id

TITLE_CHARS = 80


def history_of(conversation: Conversation) -> list[dict[str, str]]:
    """Earlier turns as chat messages; a turn without an answer adds nothing (the model would
    see a question nobody answered)."""
    messages: list[dict[str, str]] = []
    for turn in conversation.turns.select_related("run"):
        if turn.run.final_answer:
            messages += [{"role": "user", "content": turn.run.input},
                         {"role": "assistant", "content": turn.run.final_answer}]
    return messages


def add_turn_now(conversation_id: int, message: str) -> ChatTurn:
    """A queued run for `message` with the conversation so far, and its turn."""
    with transaction.atomic():
        conversation = Conversation.objects.select_related("agent", "user").get(
            pk=conversation_id)
        if conversation.agent is None:
            raise ControlError("the agent of this conversation was deleted; start a new one")
        try:
            run = create_run(conversation.agent, conversation.user, message,
                             history=history_of(conversation), worker=worker_id())
        except ValueError as exc:  # an agent whose configuration cannot run
            raise ControlError(f"the agent cannot run: {exc}") from None
        position = conversation.turns.count() + 1
        turn = ChatTurn.objects.create(conversation=conversation, run=run, position=position)
        if not conversation.title:
            conversation.title = " ".join(message.split())[:TITLE_CHARS]
        conversation.save()  # bumps `updated`: the conversation moves up the list
    return turn


def claim_queued_now(run_id: int) -> Run | None:
    """The queued run `run_id`, claimed for this process; None if someone started it."""
    claimed = Run.objects.filter(pk=run_id, status="queued", worker="").update(worker=worker_id())
    return Run.objects.select_related("user").get(pk=run_id) if claimed else None


def turn_context(turn: ChatTurn) -> dict[str, Any]:
    return {"turn": turn, "run": turn.run, "live": turn.run.status in ACTIVE_STATUSES}


add_turn = database_sync_to_async(add_turn_now)
claim_queued = database_sync_to_async(claim_queued_now)


@database_sync_to_async
def is_queued(run_id: int) -> bool:
    return Run.objects.filter(pk=run_id, status="queued", worker="").exists()


@database_sync_to_async
def owns_conversation(user: Any, conversation_id: int) -> bool:
    return Conversation.objects.owned_by(user).filter(pk=conversation_id).exists()


@database_sync_to_async
def busy(conversation_id: int) -> bool:
    return ChatTurn.objects.filter(conversation_id=conversation_id,
                                   run__status__in=ACTIVE_STATUSES).exists()


@database_sync_to_async
def turn_html(turn: ChatTurn) -> str:
    return render_to_string("chat/_turn.html", turn_context(turn))
