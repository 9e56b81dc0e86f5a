from __future__ import annotations

from django.urls import path

from agentlab.dashboard import views

app_name = "dashboard"
urlpatterns = [
    path("", views.dashboard, name="index"),
]
