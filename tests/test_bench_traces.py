"""manage.py bench_traces, a smoke run at tiny sizes: it prints the figures and cleans up."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command

from traces.diff import diff_steps
from traces.management.commands.bench_traces import perturbed, synthetic_steps
from traces.models import Run, Step

pytestmark = pytest.mark.django_db


def test_bench_prints_the_figures_and_the_goals_then_deletes_its_runs(capsys):
    call_command("bench_traces", "--sizes", "50", "--runs", "20", "--diff-sizes", "50,100",
                 "--no-browser")  # the web process could not see this test's rows
    out = capsys.readouterr().out
    assert "generating a run of 50 steps" in out and "generating 20 runs" in out
    assert re.search(r"^\s+50\s+\d+ ms\s+\d+ ms\s+[\d.]+ KB$", out, re.M), out
    assert re.search(r"Runs list \(GET /runs/\) with 20 runs: \d+ ms, [\d.]+ KB", out)
    assert re.search(r"Diff 100 vs 100 steps: \d+ ms \(\d+ rows\)", out)
    assert "25,000-step page first byte < 1 s: not measured" in out
    assert "diff 1,000 vs 1,000 < 200 ms: not measured" in out
    assert Run.objects.count() == 0 and Step.objects.count() == 0
    # the long run's figures (issue 37), each with its goal
    assert re.search(r"jump: \?step=\s+\d+ ms", out) and re.search(r"search: text\s+\d+ ms", out)
    assert re.search(r"50-step page first byte < 300 ms: \d+ ms — (met|NOT met)", out)
    assert re.search(r"search < 500 ms \(slowest kind\): \d+ ms — ", out)


def test_reuse_measures_the_kept_runs_without_making_new_ones(capsys):
    call_command("bench_traces", "--only", "page", "--sizes", "30", "--keep", "--no-browser")
    kept = Run.objects.get()
    call_command("bench_traces", "--only", "page", "--sizes", "30", "--keep", "--no-browser",
                 "--reuse")
    assert f"measuring the kept run {kept.pk} of 30 steps" in capsys.readouterr().out
    assert Run.objects.get() == kept


def test_keep_leaves_the_runs_in_the_database(capsys):
    call_command("bench_traces", "--sizes", "30", "--runs", "5", "--diff-sizes", "", "--keep",
                 "--no-browser")
    assert Run.objects.count() == 6 and Step.objects.count() == 30


def test_synthetic_runs_have_the_realistic_mix_and_a_perturbed_copy_diverges():
    steps = synthetic_steps(300)
    kinds = {s.kind for s in steps}
    assert {"llm", "tool", "thought", "plan", "error", "final"} <= kinds
    assert [s.seq for s in steps] == list(range(1, 301)) and steps[-1].kind == "final"
    assert max(len(s.text) for s in steps if s.kind == "tool") >= 2000  # long payloads too
    diff = diff_steps(steps, perturbed(steps))
    assert diff.first_divergence is not None
    assert {"changed", "inserted", "deleted"} <= {r.op for r in diff.rows}


def test_only_diff_prints_the_diff_beside_the_figure_before_and_the_goal(capsys):
    call_command("bench_traces", "--only", "diff", "--diff-sizes", "1000")
    out = capsys.readouterr().out
    assert "generating" not in out  # no run page, no runs list
    assert re.search(r"^\s+1,000\s+17 ms\s+\d+ ms\s+\d+ ms\s*$", out, re.M), out
    assert "diff 100,000 vs 100,000 < 1 s (before: 2,296 ms): not measured" in out
    assert Run.objects.count() == 0


def test_only_import_imports_an_otlp_file_and_opens_the_imported_run(capsys, tmp_path):
    call_command("bench_traces", "--only", "import", "--import-spans", "120", "--no-browser")
    out = capsys.readouterr().out
    assert "writing an OTLP JSON-lines file of 120 spans" in out and "generating" not in out
    assert re.search(r"OTLP import of 120 spans \([\d.]+ MiB of OTLP JSON lines, read whole, "
                     r"through import_run's importer\): [\d.]+ s \([\d.]+ s CPU\), [\d,]+ "
                     r"spans/s, peak memory \+\d+ MiB", out), out
    assert "anchor: bench_ingest" in out and "--import-spans 1000000" in out
    # the imported run's page, jumps and searches, as the generated run's are measured
    assert re.search(r"The imported run:\nLong run \(119 steps.*\n\s+jump: \?step=\s+\d+ ms", out)
    assert re.search(r"119-step page first byte < 300 ms: \d+ ms", out)
    assert Run.objects.count() == 0 and Step.objects.count() == 0  # its run deleted


def test_the_bench_writes_the_document_the_sdks_encoder_writes(monkeypatch):
    from types import SimpleNamespace

    from traces.management import bench_import
    from traces.otel import encode
    from traces.otel.spans import SpanData
    from traces.otlp import spans as run_spans

    run = SimpleNamespace(pk=7, agent_name="bench", paradigm="react", status="failed",
                          input="q", final_answer="a", error="boom", agent_snapshot={},
                          user=None, started_at=None, finished_at=None)
    spans = run_spans(run, synthetic_steps(120))
    spans.append(SpanData(1, 2, None, "odd", 5, 3, {"n": 2, "x": 0.5, "ok": True, "l": [1, "a"],
                                                    "e": []}, error="",
                          events=[("exception", 4, {"exception.message": "x"}), ("e", 4, {})]))
    assert bench_import.to_json(spans, "p") == encode.to_json(spans, "p")


@pytest.mark.parametrize("stream_from", [0, 10**9])  # streamed, and read whole
def test_the_otlp_file_is_the_synthetic_run_spans_and_all(tmp_path, monkeypatch, settings,
                                                          stream_from):
    from traces.management import bench_import
    from traces.models import Run as RunRow
    from traces.otel.streamed import import_path

    settings.AGENTLAB_IMPORT_STREAM_FROM_BYTES = stream_from
    monkeypatch.setattr(bench_import, "CHUNK", 350)  # written in 3 lines
    path = tmp_path / "run.jsonl"
    bench_import.write_otlp(path, 1000, synthetic_steps(999), 1_700_000_000.0)
    assert path.read_text().count("\n") == 3
    user = RunRow._meta.get_field("user").related_model.objects.create(username="imp")
    (run,) = import_path(path, user=user)
    steps = list(run.steps.order_by("seq"))
    assert run.step_count == 999 == len(steps) and run.agent_name == "bench"
    kinds = [s.kind for s in steps]
    assert kinds.count("llm") == sum(s.kind == "llm" for s in synthetic_steps(999))
    plans = {s.seq for s in steps if s.kind == "plan"}
    assert len(plans) == 3 and all(s.parent in plans for s in steps if s.kind == "tool")
    assert len({s.parent for s in steps if s.kind == "tool"}) == 3  # each chunk's own plan


def test_phoenix_says_it_is_not_installed_and_measures_the_rest(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("AGENTLAB_PHOENIX_PYTHON", str(tmp_path / "no-phoenix" / "python"))
    call_command("bench_traces", "--only", "page", "--sizes", "30", "--no-browser", "--phoenix")
    out = capsys.readouterr().out
    assert re.search(r"Phoenix anchor: skipped: Phoenix 20\.26\.1 not installed \(.+; "
                     r"scripts/test installs it, or set AGENTLAB_PHOENIX_PYTHON\)", out), out
    assert re.search(r"^\s+30\s+\d+ ms", out, re.M)  # the run page was measured all the same
    assert Run.objects.count() == 0


@pytest.mark.skipif(not __import__("agentlab.bench.phoenix_trace").bench.phoenix_trace.python(),
                    reason="Phoenix's virtualenv is not installed (scripts/test installs it)")
def test_phoenix_anchor_opens_the_same_trace_in_both(capsys):
    call_command("bench_traces", "--only", "page", "--sizes", "", "--phoenix",
                 "--phoenix-spans", "40")
    out = capsys.readouterr().out
    assert "The same trace opened in Agent Lab and in Phoenix 20.26.1" in out, out
    assert re.search(r"^\s+40\s+[\d.]+ s \+ \d+ ms\s+[\d.]+ s \([\d.]+ → [\d.]+ → \+[\d.]+\)$",
                     out, re.M), out
    assert Run.objects.count() == 0
