"""WebSocket URL patterns: one live run, one chat (protocol: docs/LIVE_PROTOCOL.md)."""

from __future__ import annotations

from django.urls import URLPattern, path

from agentlab.chat.consumers import ChatConsumer
from agentlab.live.consumers import RunConsumer

websocket_urlpatterns: list[URLPattern] = [
    path("ws/runs/<int:run_id>/", RunConsumer.as_asgi()),
    path("ws/chat/<int:conversation_id>/", ChatConsumer.as_asgi()),
]
