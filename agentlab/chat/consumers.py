"""/ws/chat/<id>/: the chat page's socket (the contract: docs/LIVE_PROTOCOL.md)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import QuerySet

from agentlab.chat import turns
from agentlab.chat.models import Conversation
from agentlab.live.frames import LiveConsumer
from agentlab.runs import control as run_control
from agentlab.runs import engine, start


class ChatConsumer(LiveConsumer):
    """/ws/chat/<id>/: "start" adds a turn and launches its run; the page then watches that
    run on its own /ws/runs/<id>/ socket (backfill, reconnect and controls come with it).
    Only the conversation's owner is admitted, and each "start" asks again."""

    frames = {"start": "converse"}
    admission = "converse"

    def target(self) -> tuple[QuerySet[Any], int]:
        return Conversation.objects.all(), self.conversation_id

    async def connect(self) -> None:
        self.conversation_id = int(self.scope["url_route"]["kwargs"]["conversation_id"])
        await super().connect()

    async def do_start(self, frame: dict[str, Any]) -> None:
        message = frame.get("message")
        if not isinstance(message, str) or not message.strip():
            raise run_control.ControlError('"message" must be the text of your question')
        message, limit = message.strip(), settings.AGENTLAB_MAX_MESSAGE_CHARS
        if len(message) > limit:
            raise run_control.ControlError(f"the message is {len(message):,} characters; a message "
                                    f"may have at most {limit:,}")
        try:
            turn = await turns.add_turn(self.conversation_id, message)
        except start.RunLimit as exc:
            raise run_control.ControlError(str(exc)) from None
        await engine.submit(turn.run)
        await self.send_json({"type": "turn", "run": turn.run_id, "position": turn.position,
                              "title": turn.conversation.title,  # the first message names it
                              "html": await turns.turn_html(turn)})
