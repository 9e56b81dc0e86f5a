"""/runs/otel/: what live export is doing in this process (staff only; others get a 404)."""

from __future__ import annotations

import os
from datetime import UTC, datetime

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from traces.otel import ids, live


def otel_status(request: HttpRequest) -> HttpResponse:
    if not request.user.is_staff:
        raise Http404("no such page")
    stats = live.STATS.as_dict()
    # Neither sent nor failed yet: waiting in the queue, or dropped by a full one.
    stats["unsent"] = max(stats["queued"] - stats["sent"] - stats["failed"], 0)
    for key in ("last_error_at", "last_sent_at"):
        if stats[key] is not None:
            stats[key] = datetime.fromtimestamp(stats[key], tz=UTC)
    headers = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or os.environ.get(
        "OTEL_EXPORTER_OTLP_HEADERS", "")
    context = {"enabled": live.enabled(), "endpoint": live.endpoint(), "stats": stats,
               "project": settings.AGENTLAB_OTEL_PROJECT,
               "installation": ids.installation_id(),
               # names only: the values are credentials
               "header_names": [h.split("=", 1)[0].strip() for h in headers.split(",")
                                if h.strip()]}
    return render(request, "traces/otel_status.html", context)
