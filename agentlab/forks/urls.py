"""Replay, fork, resume and the LLM playground (URLs under /runs/)."""

from __future__ import annotations

from django.urls import path

from agentlab.forks import views

urlpatterns = [
    path("<int:pk>/replay/", views.replay, name="run_replay"),
    path("<int:pk>/fork/<int:seq>/", views.fork, name="run_fork"),
    path("<int:pk>/resume/", views.resume, name="run_resume"),
    path("<int:pk>/steps/<int:seq>/playground/", views.playground, name="step_playground"),
]
