"""URL configuration."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from agentlab import views
from agentlab.controls.views import run_control

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("runs/", include("traces.urls")),
    path("runs/", include("agentlab.forks.urls")),
    path("runs/<int:pk>/control", run_control, name="run_control"),
    path("chat/", include("agentlab.chat.urls")),
    path("compare/", include("agentlab.compare.urls")),
    path("dashboard/", include("agentlab.dashboard.urls")),
    path("evals/", include("agentlab.evals.urls")),
    path("tokens/", include("agentlab.tokens.urls")),
    path("", include("agentlab.receiver.urls")),
    path("gateway/", include("agentlab.gateway.urls")),
    path("feedback/", include("agentlab.feedback.urls")),
    path("review/", include("agentlab.review.urls")),
    path("scorers/", include("agentlab.monitors.urls")),
]
