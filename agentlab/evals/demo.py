"""The demo suite: 41 cases over the built-in tools (agentlab/evals/data/demo_suite.jsonl).

Its expected answers come from the shipped demo data (weather_demo.json, the demo business
database, the knowledge base) and from the code review tools; tests/test_eval_import.py
recomputes every one of them from that data, so an edit to the data cannot leave it wrong.
"""

from __future__ import annotations

from pathlib import Path

from django.db import transaction

from agentlab.evals.importer import parse
from agentlab.evals.models import Suite
from agentlab.evals.suites import add_cases

DEMO_SUITE = "Demo: built-in tools"
DATA = Path(__file__).resolve().parent / "data" / "demo_suite.jsonl"
DESCRIPTION = ("Weather and air quality, calculator arithmetic, business database questions, "
               "multi-hop knowledge base questions and code review findings, with answers "
               "known from the demo data. Compare the default agents on it in one click.")


@transaction.atomic
def load_demo_suite() -> Suite:
    """Create the demo suite with its cases if it does not exist yet; an existing one (and the
    user's edits to it) is left alone."""
    suite, made = Suite.objects.get_or_create(name=DEMO_SUITE,
                                              defaults={"description": DESCRIPTION})
    if made or not suite.cases.exists():
        add_cases(suite, parse(DATA.read_text(encoding="utf-8"), "jsonl"))
    return suite


def demo_defaults() -> list[str]:
    """For defaults.load_defaults: load the demo suite; what was created, for `setup` to say."""
    existed = Suite.objects.filter(name=DEMO_SUITE, cases__isnull=False).exists()
    suite = load_demo_suite()
    return [] if existed else [f"evaluation suite '{suite.name}' ({suite.cases.count()} cases)"]
