"""`manage.py export_run RUN_ID [-o FILE] [--otlp | --otlp-protobuf]`: a run as a bundle, as
OTLP/JSON or as OTLP protobuf (docs/INTEROP.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from traces.bundle import export_bundle
from traces.models import Run
from traces.otlp import export_otlp, export_otlp_protobuf


class Command(BaseCommand):
    help = "Write a run as a versioned JSON bundle (docs/BUNDLE.md), or as OTLP/JSON spans."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("run_id", type=int)
        parser.add_argument("-o", "--output", help="File to write (default: standard output)")
        parser.add_argument("--otlp", action="store_true",
                            help="OpenTelemetry spans in OpenInference conventions instead")
        parser.add_argument("--otlp-protobuf", action="store_true",
                            help="the same spans as OTLP protobuf (needs -o)")

    def handle(self, *args: Any, run_id: int, output: str | None, otlp: bool,
               otlp_protobuf: bool = False, **options: Any) -> None:
        run = Run.objects.filter(pk=run_id).first()
        if run is None:
            raise CommandError(f"there is no run {run_id}")
        if otlp_protobuf:
            if output is None:
                raise CommandError("--otlp-protobuf writes binary: name a file with -o")
            Path(output).write_bytes(export_otlp_protobuf(run, run.steps.order_by("seq")))
            self.stderr.write(f"Run {run_id} written as OTLP protobuf to {output}")
            return
        data = export_otlp(run, run.steps.order_by("seq")) if otlp else export_bundle(run)
        text = json.dumps(data, ensure_ascii=False, indent=2)
        if output is None:
            self.stdout.write(text)
            return
        Path(output).write_text(text + "\n", encoding="utf-8")
        what = "OTLP spans" if otlp else "bundle"
        self.stderr.write(f"Run {run_id} ({run.step_count} steps) written as {what} to {output}")
