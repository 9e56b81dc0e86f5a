from __future__ import annotations

from django.urls import path

from agentlab.evals import views

app_name = "evals"
urlpatterns = [
    path("", views.index, name="index"),
    path("suites/<int:pk>/", views.suite_detail, name="suite"),
    path("experiments/<int:pk>/", views.detail, name="experiment"),
    path("experiments/<int:pk>/live/", views.live, name="live"),
    path("experiments/<int:pk>/cancel/", views.cancel, name="cancel"),
    path("experiments/<int:pk>/rerun/", views.rerun, name="rerun"),
    path("experiments/<int:pk>/compare/", views.compare_pick, name="compare_pick"),
    path("experiments/<int:pk>/compare/<int:other>/", views.compare, name="compare"),
]
