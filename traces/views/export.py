"""Downloads of one run: the versioned bundle and OpenTelemetry (OTLP JSON)."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, HttpResponse

from traces.bundle import export_bundle
from traces.otlp import export_otlp
from traces.views.run import visible_run


def _download(data: Any, filename: str) -> HttpResponse:
    response = HttpResponse(json.dumps(data, ensure_ascii=False, indent=1, default=str),
                            content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def run_export(request: HttpRequest, pk: int) -> HttpResponse:
    run = visible_run(request, pk)
    return _download(export_bundle(run), f"agentlab-run-{run.pk}.json")


def run_export_otlp(request: HttpRequest, pk: int) -> HttpResponse:
    run = visible_run(request, pk)
    steps = [s.to_record() for s in run.steps.all()]
    return _download(export_otlp(run, steps), f"agentlab-run-{run.pk}.otlp.json")
