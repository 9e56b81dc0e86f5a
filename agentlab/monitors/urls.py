from __future__ import annotations

from django.urls import path

from agentlab.monitors import views

app_name = "monitors"
urlpatterns = [
    path("", views.index, name="index"),
    path("<int:pk>/", views.scorer, name="scorer"),
    path("alerts/", views.alerts, name="alerts"),
    path("alerts/banner/", views.banner, name="banner"),
]
