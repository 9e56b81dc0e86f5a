from __future__ import annotations

from django.urls import path

from traces import views

urlpatterns = [
    path("", views.run_list, name="runs"),
    path("<int:pk>/", views.run_detail, name="run"),
]
