from __future__ import annotations

from django.urls import path

from agentlab.evals import case_views, views

app_name = "evals"
urlpatterns = [
    path("", views.index, name="index"),
    path("suites/<int:pk>/", views.suite_detail, name="suite"),
    path("cases/from-runs/", case_views.add_runs, name="add_runs"),
    path("playground-cases/", case_views.playground_cases, name="playground_cases"),
    path("playground-cases/<int:pk>/", case_views.playground_case, name="playground_case"),
    path("playground-cases/<int:pk>/delete/", case_views.playground_case_delete,
         name="playground_case_delete"),
    path("playground-cases/from/<int:pk>/<int:seq>/", case_views.playground_case_save,
         name="playground_case_save"),
    path("experiments/<int:pk>/", views.detail, name="experiment"),
    path("experiments/<int:pk>/live/", views.live, name="live"),
    path("experiments/<int:pk>/cancel/", views.cancel, name="cancel"),
    path("experiments/<int:pk>/rerun/", views.rerun, name="rerun"),
    path("experiments/<int:pk>/compare/", views.compare_pick, name="compare_pick"),
    path("experiments/<int:pk>/compare/<int:other>/", views.compare, name="compare"),
]
