"""WebSocket URL patterns: one live run, one chat (protocol: docs/LIVE_PROTOCOL.md); any other
path is refused with a clean close (4404), not a server error."""

from __future__ import annotations

from channels.generic.websocket import AsyncWebsocketConsumer
from django.urls import URLPattern, path, re_path

from agentlab.chat.consumers import ChatConsumer
from agentlab.live.consumers import RunConsumer

NOT_FOUND = 4404  # a close code of the application range: "no socket at this path"


class NoSuchSocket(AsyncWebsocketConsumer):
    """Any path without a socket: refused before the handshake completes (a browser sees the
    connection closed; nothing is logged as an error)."""

    async def connect(self) -> None:
        await self.close(code=NOT_FOUND)


websocket_urlpatterns: list[URLPattern] = [
    path("ws/runs/<int:run_id>/", RunConsumer.as_asgi()),
    path("ws/chat/<int:conversation_id>/", ChatConsumer.as_asgi()),
]
# What asgi.py routes: the sockets, then everything they do not match.
websocket_routes: list[URLPattern] = [*websocket_urlpatterns, re_path(r"", NoSuchSocket.as_asgi())]
