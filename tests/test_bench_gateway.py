"""manage.py bench_gateway at tiny sizes: real processes (the scripted server, daphne with the
gateway; LiteLLM's proxy where its virtualenv is), the real openai SDK as the clients; the
table a user reads."""

from __future__ import annotations

import json
import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from agentlab.bench.gateway import LITELLM_INSTALL, LITELLM_VERSION, Endpoint, litellm_python
from agentlab.bench.gateway_load import Agents

TINY = ("--calls", "6", "--clients", "3", "--client-calls", "2", "--rounds", "2",
        "--warmup", "1", "--calls-per-run", "10", "--model-ms", "20")
ADDED = r"[+-]\d+\.\d\d ms"
CPU = r"\d+\.\d\d ms"
ROWS = [(f"added p{q}, {mode}, {who}", f"< {goal} ms")
        for who in ("1 client", "3 clients")
        for mode in ("non-streamed total", "streamed TTFT")
        for q, goal in ((50, 2), (99, 5))]


def _row(out: str, start: str) -> list[str]:
    line = next(line for line in out.splitlines() if line.startswith(start + "  "))
    return [cell.strip() for cell in re.split(r"\s{2,}", line.strip())]


def test_a_tiny_bench_prints_each_figure_beside_its_goal(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("AGENTLAB_LITELLM_PYTHON", raising=False)
    monkeypatch.setenv("AGENTLAB_LITELLM_CACHE", str(tmp_path / "no-litellm"))
    figures_file = tmp_path / "gateway.json"
    call_command("bench_gateway", *TINY, "--json", str(figures_file))
    out = capsys.readouterr().out
    anchor = re.escape(f"LiteLLM {LITELLM_VERSION}")
    assert re.search(rf"^figure\s+goal\s+Agent Lab\s+{anchor}$", out, re.M), out
    for start, goal in ROWS:
        row = _row(out, start)
        assert row[1] == goal and re.fullmatch(ADDED, row[2]), row
        assert row[3] == f"not installed: {LITELLM_INSTALL}", row
    for who in ("1 client", "3 clients"):
        row = _row(out, f"proxy CPU per call, {who}")
        assert row[1] == "—" and re.fullmatch(CPU, row[2]) and row[3].startswith("not installed")
    assert re.search(r"^goal p50 < 2 ms and p99 < 5 ms added, recording on: (met|not met \(.+\))$",
                     out, re.M), out
    assert re.search(r"^models: 1 client → bench-model \(answers at once\); 3 clients → "
                     r"bench-model-paced \(answers after 20 ms\)$", out, re.M), out
    assert re.search(r"^  direct, 3 client\(s\): non-streamed total [\d.]+ / [\d.]+ \(6\); "
                     r"streamed TTFT [\d.]+ / [\d.]+ \(6\)$", out, re.M), out

    # Every call the gateway answered is an llm step (recording on): 1 client × (6 + 1 warm-up)
    # and 3 clients × (2 + 1) per mode; a client's calls share a traceparent, 10 at a time.
    assert re.search(r"^recording: 32 llm steps in 5 runs for the 32 calls the gateway answered",
                     out, re.M), out
    figures = json.loads(figures_file.read_text())
    assert set(figures) == {"direct", "Agent Lab", "recording"}
    for name in ("direct", "Agent Lab"):
        for level, calls in (("1", 6), ("3", 6)):
            for mode in ("non-streamed total", "streamed TTFT"):
                sample = figures[name][level][mode]
                assert len(sample["ms"]) == calls and sample["errors"] == 0, sample
                assert all(ms > 0 for ms in sample["ms"])


def test_beside_litellm_every_figure_has_its_anchor(capsys):
    if not litellm_python().exists():
        pytest.skip(f"no LiteLLM virtualenv at {litellm_python().parent.parent} "
                    f"(make it with: {LITELLM_INSTALL})")
    call_command("bench_gateway", *TINY)
    out = capsys.readouterr().out
    for start, _goal in ROWS:
        assert re.fullmatch(ADDED, _row(out, start)[3]), out
    assert re.fullmatch(CPU, _row(out, "proxy CPU per call, 3 clients")[3])
    assert re.search(rf"^  LiteLLM {re.escape(LITELLM_VERSION)}, 1 client\(s\): "
                     r"non-streamed total [\d.]+ / [\d.]+ \(6\)", out, re.M), out


def test_bad_sizes_and_a_missing_litellm_are_refused_before_anything_starts():
    with pytest.raises(CommandError, match="numbers ≥ 1"):
        call_command("bench_gateway", "--calls", "0")
    with pytest.raises(CommandError, match="2 or more"):
        call_command("bench_gateway", "--clients", "1")
    with pytest.raises(CommandError, match="no LiteLLM at /nonexistent/python"):
        call_command("bench_gateway", "--litellm-python", "/nonexistent/python")


def test_a_client_starts_a_new_trace_every_calls_per_run_calls():
    agents = Agents(Endpoint("x", "http://127.0.0.1:9/v1", "k"), 2, calls_per_run=3)
    first = [agents.headers(0)["traceparent"] for _ in range(7)]
    other = agents.headers(1)["traceparent"]
    traces = [t.split("-")[1] for t in first]
    assert traces[0] == traces[1] == traces[2] != traces[3] == traces[4] == traces[5] != traces[6]
    assert other.split("-")[1] not in traces
    assert len({t.split("-")[2] for t in first}) == 7  # a span per call
    assert all(re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-01", t) for t in first)
