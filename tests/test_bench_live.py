"""manage.py bench_live: a smoke run with tiny numbers (real processes: the instant model
server, daphne, the WebSocket watchers), and its pure parts."""

from __future__ import annotations

import json
import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from agentlab.bench.stack import _reply, tool_calls_for
from agentlab.bench.watch import (
    CLOCK_END,
    CLOCK_RECORDED,
    CLOCK_SENT,
    latency_ms,
    percentile,
    stage_ms,
)


def test_a_tiny_bench_prints_the_table_and_the_goals(tmp_path, capsys):
    out_file = tmp_path / "bench.json"
    call_command("bench_live", "--runs", "1,2", "--steps", "4", "--timeout", "60",
                 "--json", str(out_file))
    out = capsys.readouterr().out
    assert "p95 ms" in out and "overhead ms/step" in out
    assert "goal p95 < 50 ms at 20 runs: not measured" in out
    assert "goal overhead < 2 ms/step (at 1 run(s)):" in out
    assert "committed → arrival p50" in out and "ms per LLM call" in out
    assert "the app's processes used" in out and "ms of CPU per step" in out
    levels = json.loads(out_file.read_text())["web"]
    assert [lv["runs"] for lv in levels] == [1, 2]
    for lv in levels:
        assert lv["failed"] == 0
        # llm, tool, llm, final per run; an llm step arrives twice (running, then done).
        assert lv["steps"] == 4 * lv["runs"]
        assert lv["frames"] >= lv["steps"]
        assert lv["clock"] == CLOCK_RECORDED  # from the runtime's hand-over, queue included
        assert len(lv["committed_ms"]) == lv["frames"]
        assert lv["model_ms_per_call"] > 0
        assert 0 <= lv["latency"]["p50"] <= lv["latency"]["p95"] <= lv["latency"]["max"] < 5000
        assert lv["steps_per_s"] > 0 and lv["overhead_ms_per_step"] >= 0
        assert lv["server_cpu_ms_per_step"] > 0


def test_both_profiles_side_by_side_with_a_paced_model(tmp_path, capsys):
    """Real processes on both profiles: one daphne on SQLite, then two daphne and two workers
    on a throw-away PostgreSQL and Redis (skipped where Debian's servers are missing)."""
    from agentlab.bench.servers import ServerMissing, postgres_bin

    try:
        postgres_bin()
    except ServerMissing as exc:
        pytest.skip(str(exc))
    out_file = tmp_path / "bench.json"
    call_command("bench_live", "--profile", "both", "--runs", "2", "--steps", "4",
                 "--model-ms", "50", "--timeout", "90", "--json", str(out_file), "--calls")
    out = capsys.readouterr().out
    assert "== profile scale: 2 daphne + 2 workers, PostgreSQL + Redis, a model answering " \
           "in 50 ms" in out
    assert "side by side: one process vs 2 web + 2 workers" in out
    assert "goal throughput ≥ 1.5× one process (at 2 runs):" in out
    assert "goal CPU < 1.5 ms/step, all processes (at 2 runs):" in out
    assert "ms in PostgreSQL and Redis" in out
    assert "the whole machine used" in out and "cores busy" in out
    assert "the ceiling here: " in out and "ms of CPU per step; one process" in out
    assert "ms per stage: row written" in out and "Redis → web" in out
    # --calls: what the scale profile asked its servers, per step (only it has servers)
    assert out.count("  per step (8 steps): SQL statements ") == 1
    # The step rows and their count on the run: one statement (traces/upsert.py)
    assert re.search(r'\n +\d+\.\d{3}  sql   WITH written AS \(INSERT INTO "traces_step"', out)
    assert re.search(r"\n +\d+\.\d{3}  redis \w+", out)
    figures = json.loads(out_file.read_text())
    for profile in ("web", "scale"):
        (level,) = figures[profile]
        assert level["failed"] == 0 and level["steps"] == 8  # every step of both runs arrived
        assert level["clock"] == CLOCK_RECORDED
        assert level["model_ms_per_call"] >= 50  # the pacing reached the runs
    assert figures["scale"][0]["servers_cpu_ms_per_step"] > 0
    assert figures["web"][0]["servers_cpu_ms_per_step"] is None
    # Where the time went: a worker's events cross Redis; one process's go straight out.
    scale_stages, web_stages = figures["scale"][0]["stages_ms"], figures["web"][0]["stages_ms"]
    assert {"worker queue", "Redis → web", "web → browser"} <= set(scale_stages)
    assert set(web_stages) == {"row written", "committed → browser"}
    for stages in (scale_stages, web_stages):
        assert all(0 <= v["p50"] <= v["p95"] < 5000 for v in stages.values())
    assert figures["scale"][0]["machine_cores_busy"] > 0


def test_bad_numbers_are_refused_before_anything_starts():
    with pytest.raises(CommandError, match="whole numbers"):
        call_command("bench_live", "--runs", "one")
    with pytest.raises(CommandError, match="≥ 1"):
        call_command("bench_live", "--runs", "0")
    with pytest.raises(CommandError, match="at least 1"):
        call_command("bench_live", "--profile", "scale", "--workers", "0")


def test_latency_uses_the_recorders_stamp_when_the_frame_has_one():
    step = {"started_at": 100.0, "duration_ms": 500.0}
    assert latency_ms({"step": step, "recorded_at": 100.5, "sent_at": 100.9}, 101.0) == (
        pytest.approx((500.0, CLOCK_RECORDED)))
    assert latency_ms({"step": step, "sent_at": 100.9}, 101.0) == pytest.approx(
        (100.0, CLOCK_SENT))
    assert latency_ms({"step": step}, 101.0) == pytest.approx((500.0, CLOCK_END))


def test_a_frame_of_the_scale_profile_splits_its_time_by_stage():
    frame = {"recorded_at": 100.000, "sent_at": 100.010, "out_at": 100.015,
             "heard_at": 100.018}
    assert stage_ms(frame, 100.020) == pytest.approx({
        "row written": 10.0, "worker queue": 5.0, "Redis → web": 3.0, "web → browser": 2.0,
        "committed → browser": 10.0})
    # One process's frames never cross Redis: no stamps for those stages, no figures.
    assert set(stage_ms({"recorded_at": 1.0, "sent_at": 1.5}, 2.0)) == {
        "row written", "committed → browser"}


def test_percentile_is_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 95), percentile(values, 99)) == (
        50.0, 95.0, 99.0)
    assert percentile([7.0], 99) == 7.0 and percentile([], 50) == 0.0


def test_the_instant_model_calls_the_tool_until_enough_results_are_in():
    tools = [{"type": "function", "function": {"name": "calculator"}}]
    first = _reply({"messages": [{"role": "user", "content": "q"}], "tools": tools}, 2)
    assert first["tool_calls"][0]["function"]["name"] == "calculator"
    two = [{"role": "user"}, {"role": "tool"}, {"role": "tool"}]
    assert _reply({"messages": two, "tools": tools}, 2) == {"content": "The answer is 42."}
    assert tool_calls_for(20) == 9 and tool_calls_for(2) == 0


async def test_a_run_refused_at_start_ends_its_probe_instead_of_waiting_forever():
    from agentlab.bench.watch import Probe

    probe = Probe(7)
    probe.on_frame({"type": "error", "error": "the run is not active", "frame": '{"x": 1}'}, 1.0)
    assert not probe.done.done()  # any other error: the run may still end
    probe.on_frame({"type": "error", "error": "You already have 10 runs going",
                    "frame": '{"action": "start"}'}, 2.0)
    assert probe.done.done() and probe.status == "refused" and probe.finished_at == 2.0
    assert probe.errors[-1] == "You already have 10 runs going"
