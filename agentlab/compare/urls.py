from __future__ import annotations

from django.urls import path

from agentlab.compare import views

app_name = "compare"
urlpatterns = [
    path("", views.index, name="index"),
    path("<int:pk>/", views.detail, name="detail"),
    path("<int:pk>/summary/", views.summary, name="summary"),
    path("<int:pk>/rerun/", views.rerun, name="rerun"),
]
