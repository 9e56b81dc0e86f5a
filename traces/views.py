"""Runs list and one run (the full trace viewer grows here)."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from traces.models import Run


def run_list(request: HttpRequest) -> HttpResponse:
    runs = Run.objects.visible_to(request.user).select_related("user")
    page = Paginator(runs, 50).get_page(request.GET.get("page"))
    return render(request, "traces/run_list.html", {"page": page})


def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    # Another user's run is a 404, not a 403: its existence is not disclosed.
    run = get_object_or_404(Run.objects.visible_to(request.user), pk=pk)
    return render(request, "traces/run_detail.html", {"run": run, "steps": run.steps.all()[:500]})
