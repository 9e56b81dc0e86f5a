"""WebSocket URL patterns (consumers arrive with the live-runs issue)."""

from __future__ import annotations

from django.urls import URLPattern

websocket_urlpatterns: list[URLPattern] = []
