"""The live scorers' pages: the list, one scorer's scores, the alerts, and the banner every
page loads. Read-only (staff configure scorers in the admin); each figure is computed over the
runs the visitor may see, and an alert is shown to staff and to the one user whose runs made it."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.views.decorators.http import require_GET

from agentlab.monitors import figures
from agentlab.monitors.models import METRICS, STATUSES, Alert, LiveScorer

BANNER_ALERTS = 3


@require_GET
def index(request: HttpRequest) -> HttpResponse:
    scorers = list(LiveScorer.objects.select_related("agent"))
    counts = figures.overview(request.user)
    for scorer in scorers:
        scorer.figures = counts.get(scorer.pk, {})  # type: ignore[attr-defined]
    open_alerts = Alert.objects.visible_to(request.user).open().select_related("scorer")
    return render(request, "monitors/index.html", {
        "scorers": scorers, "alerts": list(open_alerts[:20]), "metrics": METRICS})


@require_GET
def scorer(request: HttpRequest, pk: int) -> HttpResponse:
    live = get_object_or_404(LiveScorer.objects.select_related("agent", "judge_profile"), pk=pk)
    alerts = Alert.objects.visible_to(request.user).filter(scorer=live)
    return render(request, "monitors/scorer.html", {
        "scorer": live, "figures": figures.scorer_figures(live, request.user, timezone.now()),
        "rows": figures.table(live, request.user), "statuses": STATUSES,
        "alerts": list(alerts[:10]), "metrics": METRICS})


@require_GET
def alerts(request: HttpRequest) -> HttpResponse:
    rows = Alert.objects.visible_to(request.user).select_related("scorer")
    return render(request, "monitors/alerts.html", {"alerts": list(rows[:100])})


@require_GET
def banner(request: HttpRequest) -> HttpResponse:
    """The open alerts the visitor may see, for the top of every page (loaded by htmx after
    the page, so no page waits for it); nothing when there are none."""
    rows = list(Alert.objects.visible_to(request.user).open().select_related("scorer")
                [:BANNER_ALERTS + 1])
    return render(request, "monitors/_banner.html", {"alerts": rows[:BANNER_ALERTS],
                                                     "more": len(rows) > BANNER_ALERTS})
