"""Top-level pages: home and a health probe."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from agentlab.models import Agent, ModelProfile
from traces.models import Run


def home(request: HttpRequest) -> HttpResponse:
    profiles = ModelProfile.objects.select_related("fallback")
    agents = list(Agent.objects.select_related("model_profile"))
    recent = Run.objects.visible_to(request.user).only(
        "pk", "input", "agent_name", "paradigm", "status", "created")[:8]
    return render(request, "home.html", {"profiles": profiles, "agents": agents,
                                         "recent": recent})


@login_not_required
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness for scripts and load balancers; says nothing private."""
    return JsonResponse({"ok": True})
