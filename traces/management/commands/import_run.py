"""`manage.py import_run FILE --user USERNAME`: a bundle becomes a new run, OTLP trace data
(protobuf or JSON) a run per trace (all or nothing). A big OTLP JSON-lines file streams
(traces/otel/streamed.py): a million spans import without holding the file."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from traces.bundle import BundleError
from traces.otel.decode import OTLPError
from traces.otel.importer import import_file
from traces.otel.streamed import import_path


class Command(BaseCommand):
    help = "Import a run bundle written by export_run, or OTLP traces (one run each); a file " \
           "that is neither is refused with the reason and the place, and nothing is imported."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("file", help="Bundle or OTLP file ('-' for standard input)")
        parser.add_argument("--user", required=True, help="Owner of the imported run")

    def handle(self, *args: Any, file: str, user: str, **options: Any) -> None:
        owner = get_user_model().objects.filter(username=user).first()
        if owner is None:
            raise CommandError(f"there is no user {user!r}")
        try:
            runs = (import_file(sys.stdin.buffer.read(), user=owner) if file == "-"
                    else import_path(Path(file), user=owner))
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc.strerror}") from None
        except BundleError as exc:
            raise CommandError(f"{file} is not a valid run bundle: {exc}") from None
        except OTLPError as exc:
            raise CommandError(f"{file} is neither a run bundle nor OTLP traces: {exc}") from None
        for run in runs:
            self.stdout.write(f"Imported run {run.pk} ({run.step_count} steps): "
                              f"{reverse('run', args=[run.pk])}")
