"""`manage.py experiment_table`: an experiment's table written into a document between its
markers, with the date and the machine; the rest of the document left as it was."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from tests.factories import run_experiment, sums_suite


@pytest.fixture
def setup(fake_llm, staff):
    return sums_suite(fake_llm.base_url)


@pytest.mark.django_db(transaction=True)
def test_the_table_replaces_only_its_section(fake_llm, setup, tmp_path):
    fake_llm.script("It is 2.", "It is 4.", "It is 6.")
    out = run_experiment("Sums", "Alpha", "--concurrency", "1")
    experiment = int(out.splitlines()[0].split()[1].rstrip(":"))
    doc = tmp_path / "PARADIGMS.md"
    doc.write_text("# Title\n\nbefore\n\n<!-- experiment-table:start -->\nold figures\n"
                   "<!-- experiment-table:end -->\n\nafter\n", encoding="utf-8")
    call_command("experiment_table", str(experiment), "--write", str(doc),
                 "--note", "Load: busy.", stdout=io.StringIO())
    text = doc.read_text(encoding="utf-8")
    assert text.startswith("# Title\n\nbefore\n\n<!-- experiment-table:start -->")
    assert text.endswith("<!-- experiment-table:end -->\n\nafter\n")
    assert "old figures" not in text and "Load: busy." in text
    assert f"Experiment {experiment} on suite 'Sums', 3 cases × 1 agents" in text
    assert "Machine: " in text and "load average when written" in text
    assert "| Alpha | 1.00 | 100% (3/3) | 0 | 3/3 |" in text
