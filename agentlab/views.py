"""Top-level pages: home and a health probe."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from agentlab.models import ModelProfile


def home(request: HttpRequest) -> HttpResponse:
    profiles = ModelProfile.objects.select_related("fallback")
    return render(request, "home.html", {"profiles": profiles})


@login_not_required
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness for scripts and load balancers; says nothing private."""
    return JsonResponse({"ok": True})
