"""manage.py bench_graph at tiny sizes: the figures with their goal, a long run's graph summed
once and read from its aggregate, and --keep/--reuse."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command

from traces import graph_summary
from traces.models import Run, RunGraph, Step

pytestmark = pytest.mark.django_db


def test_bench_graph_prints_each_size_and_the_goal_then_deletes_its_runs(capsys, monkeypatch):
    monkeypatch.setattr(graph_summary, "SUMMED_FROM", 100)  # 300 steps count as long
    call_command("bench_graph", "--sizes", "50,300")
    out = capsys.readouterr().out
    assert "generating a run of 300 steps" in out
    assert re.search(r"graph summed in [\d.]+ s", out)  # the long one only
    assert out.count("graph summed") == 1
    assert re.search(r"^\| 300 \| \d+ \| [\d.]+ \| \d+ \| [\d.]+ \|$", out, re.M), out
    assert re.search(r"the longest run's graph, first view < 300 ms and < 2× the smallest's: "
                     r"300 steps: \d+ ms, [\d.]+× — (met|NOT met)", out), out
    assert Run.objects.count() == 0 and Step.objects.count() == 0
    assert RunGraph.objects.count() == 0


def test_reuse_measures_a_kept_run(capsys, monkeypatch):
    monkeypatch.setattr(graph_summary, "SUMMED_FROM", 100)
    call_command("bench_graph", "--sizes", "200", "--keep")
    kept = Run.objects.get()
    assert RunGraph.objects.get(run=kept).steps == 200
    call_command("bench_graph", "--sizes", "200", "--reuse")
    assert f"measuring the kept run {kept.pk} of 200 steps" in capsys.readouterr().out
