#!/usr/bin/env python
"""Django's command-line utility for Agent Lab."""

from __future__ import annotations

import os
import sys


def main() -> None:
    if sys.version_info < (3, 12):  # noqa: UP036 (a clear message for a 3.11 interpreter)
        sys.exit(
            f"Agent Lab needs Python 3.12 or newer (Django 6.1); this is {sys.version.split()[0]}. "
            "Use .venv/bin/python or run scripts/run."
        )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentlab.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
