"""Downloads of one run: the versioned bundle and OpenTelemetry (OTLP JSON or protobuf)."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, HttpResponse

from traces.bundle import export_bundle
from traces.otlp import export_otlp, export_otlp_protobuf
from traces.views.run import visible_run


def _download(body: bytes | str, content_type: str, filename: str) -> HttpResponse:
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _json(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, indent=1, default=str)


def run_export(request: HttpRequest, pk: int) -> HttpResponse:
    run = visible_run(request, pk)
    return _download(_json(export_bundle(run)), "application/json",
                     f"agentlab-run-{run.pk}.json")


def run_export_otlp(request: HttpRequest, pk: int) -> HttpResponse:
    run = visible_run(request, pk)
    steps = [s.to_record() for s in run.steps.all()]
    return _download(_json(export_otlp(run, steps)), "application/json",
                     f"agentlab-run-{run.pk}.otlp.json")


def run_export_otlp_protobuf(request: HttpRequest, pk: int) -> HttpResponse:
    """What a collector's /v1/traces takes as it is (`curl --data-binary @file -H
    'Content-Type: application/x-protobuf'`)."""
    run = visible_run(request, pk)
    steps = [s.to_record() for s in run.steps.all()]
    return _download(export_otlp_protobuf(run, steps), "application/x-protobuf",
                     f"agentlab-run-{run.pk}.otlp.pb")
