"""Replay, fork, resume and the LLM playground (URLs under /runs/)."""

from __future__ import annotations

from django.urls import path

from agentlab import fork_views

urlpatterns = [
    path("<int:pk>/replay/", fork_views.replay, name="run_replay"),
    path("<int:pk>/fork/<int:seq>/", fork_views.fork, name="run_fork"),
    path("<int:pk>/resume/", fork_views.resume, name="run_resume"),
    path("<int:pk>/steps/<int:seq>/playground/", fork_views.playground, name="step_playground"),
]
