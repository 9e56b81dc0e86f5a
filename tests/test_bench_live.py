"""manage.py bench_live: a smoke run with tiny numbers (real processes: the instant model
server, daphne, the WebSocket watchers), and its pure parts."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from agentlab.bench.stack import _reply, tool_calls_for
from agentlab.bench.watch import CLOCK_END, CLOCK_RECORDED, CLOCK_SENT, latency_ms, percentile


def test_a_tiny_bench_prints_the_table_and_the_goals(tmp_path, capsys):
    out_file = tmp_path / "bench.json"
    call_command("bench_live", "--runs", "1,2", "--steps", "4", "--timeout", "60",
                 "--json", str(out_file))
    out = capsys.readouterr().out
    assert "p95 ms" in out and "overhead ms/step" in out
    assert "goal p95 < 50 ms at 20 runs: not measured" in out
    assert "goal overhead < 2 ms/step (at 1 run(s)):" in out
    assert "committed → arrival p50" in out and "ms per LLM call" in out
    assert "the server process used" in out and "ms of CPU per step" in out
    levels = json.loads(out_file.read_text())
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


def test_bad_numbers_are_refused_before_anything_starts():
    with pytest.raises(CommandError, match="whole numbers"):
        call_command("bench_live", "--runs", "one")
    with pytest.raises(CommandError, match="≥ 1"):
        call_command("bench_live", "--runs", "0")


def test_latency_uses_the_recorders_stamp_when_the_frame_has_one():
    step = {"started_at": 100.0, "duration_ms": 500.0}
    assert latency_ms({"step": step, "recorded_at": 100.5, "sent_at": 100.9}, 101.0) == (
        pytest.approx((500.0, CLOCK_RECORDED)))
    assert latency_ms({"step": step, "sent_at": 100.9}, 101.0) == pytest.approx(
        (100.0, CLOCK_SENT))
    assert latency_ms({"step": step}, 101.0) == pytest.approx((500.0, CLOCK_END))


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
