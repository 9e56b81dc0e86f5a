"""manage.py bench_dashboard, a smoke run at tiny sizes: it prints the figures and cleans up."""

from __future__ import annotations

import random
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db.models import Count

from agentlab.management.commands.bench_dashboard import BENCH_USER, step_counts, synthetic_run
from traces.models import Run, Step

pytestmark = pytest.mark.django_db


def test_bench_prints_steps_runs_time_and_queries_then_deletes_everything(capsys):
    call_command("bench_dashboard", "--steps", "120", "--runs", "12", "--repeat", "1")
    out = capsys.readouterr().out
    assert "generated 120 steps over 12 runs" in out
    assert "Dashboard with 120 steps over 12 runs" in out
    rows = re.findall(r"^\s+/dashboard/\?period=(\w+)&group=(\w+)\s+(\d+) ms\s+\d+ ms"
                      r"\s+\d+ ms\s+(\d+)\s",
                      out, re.M)
    assert {(p, g) for p, g, _ms, _q in rows} == {
        ("30d", "agent"), ("30d", "paradigm"), ("30d", "model"), ("7d", "agent"),
        ("all", "agent")}
    assert all(int(q) <= 20 for *_rest, q in rows)
    assert re.search(r"Goal: every page < 1 s at 120 steps: [\d.]+ s — (met|NOT met)", out)
    assert Run.objects.count() == 0 and Step.objects.count() == 0
    assert not get_user_model().objects.filter(username=BENCH_USER).exists()


def test_keep_leaves_the_runs_whose_totals_match_their_steps(capsys):
    call_command("bench_dashboard", "--steps", "80", "--runs", "8", "--repeat", "1", "--keep")
    assert Run.objects.count() == 8 and Step.objects.count() == 80
    for run in Run.objects.annotate(n=Count("steps")):
        assert run.n == run.step_count
        assert run.llm_calls == run.steps.filter(kind="llm").count()
        assert run.tool_calls == run.steps.filter(kind="tool").count()
    with pytest.raises(CommandError, match="exists already"):
        call_command("bench_dashboard", "--steps", "80", "--runs", "8")


def test_synthetic_runs_cover_every_paradigm_and_add_up():
    rng = random.Random(1)
    counts = step_counts(rng, 50, 1_000)
    assert sum(counts) == 1_000 and min(counts) >= 2
    runs = [synthetic_run(rng, i, 30) for i in range(14)]
    assert {f["paradigm"] for f, _ in runs} >= {"react", "plan_execute", "reflexion", "lats"}
    roles = {s["role"] for _, specs in runs for s in specs if s["kind"] == "llm"}
    assert {"planner", "evaluator", "judge", "actor"} <= roles
    assert any(s["status"] == "error" for _, specs in runs for s in specs)
