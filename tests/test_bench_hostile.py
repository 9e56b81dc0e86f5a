"""manage.py bench_hostile, a smoke run at tiny sizes: it prints each figure and leaves no run."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from django.db import connection

from traces.models import Run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("own_var_dir")]


def test_the_bench_prints_what_hostile_input_costs_and_cleans_up(capsys):
    call_command("bench_hostile", "--steps", "300", "--re-length", "12")
    out = capsys.readouterr().out
    assert re.search(r"Python's re, n=12 \(blocks the event loop\)\s+[\d.]+ s", out), out
    assert re.search(r"user_regex, n=26 .*\s+[\d.]+ ms, answered", out)
    assert re.search(r"user_regex, '\(a\|aa\)\+\$' .*\s+[\d.]+ s, stopped at the limit", out)
    assert re.search(r"time, outcome\s+[\d.]+ s, refused", out)
    assert re.search(r"the import\s+[\d.]+ s, run \d+ with 300 steps", out)
    if connection.vendor == "sqlite":
        assert re.search(r"'database is locked' for the other writer\s+0$", out, re.M)
    else:  # the scale profile's PostgreSQL has no database-wide write lock to wait for
        assert re.search(r"the other writer\s+not measured on postgresql", out)
    assert Run.objects.count() == 0
