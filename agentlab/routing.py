"""WebSocket URL patterns: one live run, one chat (protocol: issue 7)."""

from __future__ import annotations

from django.urls import URLPattern, path

from agentlab import consumers

websocket_urlpatterns: list[URLPattern] = [
    path("ws/runs/<int:run_id>/", consumers.RunConsumer.as_asgi()),
    path("ws/chat/<int:conversation_id>/", consumers.ChatConsumer.as_asgi()),
]
