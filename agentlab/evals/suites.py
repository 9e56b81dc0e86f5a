"""Writing imported cases: all rows or none (the importer has already checked every row)."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Max

from agentlab.evals.importer import CaseRow, parse
from agentlab.evals.models import Case, Suite


@transaction.atomic
def add_cases(suite: Suite, rows: list[CaseRow]) -> list[Case]:
    """Append `rows` after the suite's last case, in file order."""
    start = (suite.cases.aggregate(m=Max("position"))["m"] or 0) + 1
    return Case.objects.bulk_create(
        [Case(suite=suite, position=start + i, **row.model_fields()) for i, row in
         enumerate(rows)])


@transaction.atomic
def import_text(suite_name: str, text: str, fmt: str, *, description: str = ""
                ) -> tuple[Suite, list[Case]]:
    """Parse, then create the suite if needed and add its cases in one transaction.
    Raises importer.ImportFailed (nothing written) when any row is bad."""
    rows = parse(text, fmt)
    suite, _ = Suite.objects.get_or_create(name=suite_name,
                                           defaults={"description": description})
    return suite, add_cases(suite, rows)
