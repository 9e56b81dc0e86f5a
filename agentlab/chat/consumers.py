"""/ws/chat/<id>/: the chat page's socket (the contract: docs/LIVE_PROTOCOL.md)."""

from __future__ import annotations

from typing import Any

from agentlab.chat import turns
from agentlab.live import control as live
from agentlab.live.consumers import LiveConsumer


class ChatConsumer(LiveConsumer):
    """/ws/chat/<id>/: "start" adds a turn and launches its run; the page then watches that
    run on its own /ws/runs/<id>/ socket (backfill, reconnect and controls come with it)."""

    actions = ("start",)

    async def connect(self) -> None:
        self.conversation_id = int(self.scope["url_route"]["kwargs"]["conversation_id"])
        await self.accept()
        if not await turns.owns_conversation(self.scope["user"], self.conversation_id):
            return await self.refuse()

    async def do_start(self, frame: dict[str, Any]) -> None:
        message = frame.get("message")
        if not isinstance(message, str) or not message.strip():
            raise live.ControlError('"message" must be the text of your question')
        if await turns.busy(self.conversation_id):
            raise live.ControlError("the previous answer is still running")
        turn = await turns.add_turn(self.conversation_id, message.strip())
        live.start(turn.run)
        await self.send_json({"type": "turn", "run": turn.run_id, "position": turn.position,
                              "html": await turns.turn_html(turn)})
