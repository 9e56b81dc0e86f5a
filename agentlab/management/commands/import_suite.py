"""`manage.py import_suite FILE --suite NAME`: add the cases of a JSONL or CSV file to a suite
(created when new). Every bad row is listed as "line N, field: reason"; then nothing is saved."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from agentlab.evals import importer, suites


class Command(BaseCommand):
    help = "Import evaluation cases from a .jsonl or .csv file into a suite (all or nothing)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("file", help="a .jsonl or .csv file")
        parser.add_argument("--suite", required=True, help="suite name (created when new)")
        parser.add_argument("--format", choices=["jsonl", "csv"],
                            help="default: from the file's extension")
        parser.add_argument("--description", default="", help="for a new suite")

    def handle(self, *args: Any, file: str, suite: str, format: str | None, description: str,
               **options: Any) -> None:
        path = Path(file)
        try:
            fmt = format or importer.guess_format(path.name)
            text = importer.decode(path.read_bytes())
            made, cases = suites.import_text(suite, text, fmt, description=description)
        except FileNotFoundError:
            raise CommandError(f"no such file: {file}") from None
        except importer.ImportFailed as exc:
            raise CommandError(str(exc)) from None
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"Imported {len(cases)} case(s) into suite '{made.name}' "
                          f"({made.cases.count()} in all).")
