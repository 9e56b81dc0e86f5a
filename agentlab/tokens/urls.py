from __future__ import annotations

from django.urls import path

from agentlab.tokens import views

app_name = "tokens"
urlpatterns = [
    path("", views.index, name="index"),
    path("<int:pk>/revoke/", views.revoke, name="revoke"),
]
