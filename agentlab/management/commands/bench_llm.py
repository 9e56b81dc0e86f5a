"""`manage.py bench_llm [AGENT] [--questions N]`: how long the embedded model's calls take inside
real ReAct runs: the start (loaded and warmed), the first call after it, then p50/p90 of every
LLM call. Starts its own server (so "first call after start" is one), records the runs.

`--soak N` (issue 38) instead sends N varied requests straight to a fresh server
(`agentlab.llm.soak`: every shape the default agents send, prompts of a few dozen to ~2,500
tokens) and prints the server's resident memory every `--every` requests as a chart; it fails
if the memory ends above `--ceiling-mb` or still grows in the last third.

Goals (issue 22): p50 of an LLM call inside a ReAct run < 2 s, first call after start < 3 s."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from agentlab.management.commandutil import find_agent, find_user, warm_agents
from traces.models import Step

QUESTIONS = [json.loads(line)["question"] for line in """\
{"question": "What is the temperature in Paris right now, in °C?"}
{"question": "What is the air quality index (AQI) in Beijing right now?"}
{"question": "What is 17 * 23?"}
{"question": "What is the weather like in London right now?"}
{"question": "Is the air quality in Sydney good right now? Answer yes or no."}
{"question": "What is the humidity in São Paulo right now, in percent?"}""".splitlines()]


SOAK_CEILING_MB = 1800  # model and buffers (~0.4 GB) + the 1 GiB prompt cache + slack
SOAK_GROWTH_MB = 100  # the last third of a soak may not add more than this


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


class Command(BaseCommand):
    help = "Time the embedded model's LLM calls inside ReAct runs (start, first call, p50/p90)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("agent", nargs="?", default="ReAct (function calling)")
        parser.add_argument("--questions", type=int, default=len(QUESTIONS))
        parser.add_argument("--soak", type=int, default=0, metavar="N",
                            help="memory soak: N varied requests, RSS over time")
        parser.add_argument("--every", type=int, default=0,
                            help="soak: sample RSS every this many requests (default N/30)")
        parser.add_argument("--ceiling-mb", type=float, default=SOAK_CEILING_MB,
                            help=f"soak: fail above this RSS (default {SOAK_CEILING_MB:g})")
        parser.add_argument("--abort-mb", type=float, default=6000,
                            help="soak: stop at once above this RSS, to spare the machine")

    def handle(self, *args: Any, agent: str, questions: int, soak: int, every: int,
               ceiling_mb: float, abort_mb: float, **options: Any) -> None:
        if soak:
            self.soak(soak, every or max(1, soak // 30), ceiling_mb, abort_mb)
            return
        from agentlab.llm.local_server import LocalModelError, LocalModelServer
        from agentlab.runs.execution import execute_run
        from agentlab.runs.start import start_run

        row = find_agent(agent)
        if not row.model_profile.is_embedded:
            raise CommandError(f"{row.name} does not use the embedded model.")
        owner = find_user(None)
        self.stdout.write(f"load average before (1/5/15 min): {_load()}")
        started = time.perf_counter()
        server = LocalModelServer(port=0, write_state=False)
        try:
            os.environ["AGENTLAB_LOCAL_LLM_URL"] = server.start()
        except LocalModelError as exc:
            raise CommandError(str(exc)) from None
        warm_agents([row], self.stdout)  # as `serve` warms the ReAct agents
        ready_s = time.perf_counter() - started
        durations: list[float] = []
        first_ms: float | None = None
        try:
            for i, question in enumerate(QUESTIONS[:questions], 1):
                run = start_run(owner, row, question, places=0)
                outcome = asyncio.run(execute_run(run))
                calls = list(Step.objects.filter(run=run, kind="llm", status="ok")
                             .order_by("seq").values_list("duration_ms", flat=True))
                if first_ms is None and calls:
                    first_ms = calls[0]
                durations += [c for c in calls if c is not None]
                self.stdout.write(f"[{i}] {outcome.status} · {len(calls)} calls "
                                  f"{', '.join(f'{c / 1000:.1f}' for c in calls)} s · "
                                  f"{(outcome.answer or '')[:70]!r} · /runs/{run.pk}/")
        finally:
            server.stop()
            os.environ.pop("AGENTLAB_LOCAL_LLM_URL", None)
        if not durations:
            raise CommandError("no LLM call finished")
        self.stdout.write(
            f"\n{row.name}: started and warmed in {ready_s:.1f} s; first call after start "
            f"{(first_ms or 0) / 1000:.2f} s (goal < 3 s); LLM call p50 "
            f"{statistics.median(durations) / 1000:.2f} s (goal < 2 s), p90 "
            f"{percentile(durations, 0.9) / 1000:.2f} s over {len(durations)} calls; "
            f"load average after: {_load()}")


    def soak(self, count: int, every: int, ceiling_mb: float, abort_mb: float) -> None:
        from agentlab.llm import soak
        from agentlab.llm.local_server import LocalModelError, LocalModelServer

        server = LocalModelServer(port=0, write_state=False)
        started = time.perf_counter()
        try:
            url = server.start()
        except LocalModelError as exc:
            raise CommandError(str(exc)) from None
        assert server.process is not None
        pid = server.process.pid
        samples = [(0, soak.rss_mb(pid))]
        self.stdout.write(f"server pid {pid} ready in {time.perf_counter() - started:.1f} s, "
                          f"RSS {samples[0][1]:.0f} MB; {count} requests, RSS every {every}")
        failed = 0
        started = time.perf_counter()
        try:
            for i, body in enumerate(soak.requests(count), 1):
                try:
                    soak.send(url, body)
                except OSError as exc:  # a 400 (prompt over the window) counts, and goes on
                    failed += 1
                    if not server.running:
                        raise CommandError(f"the server died at request {i}: {exc}\n"
                                           f"{server.log_tail()}") from None
                if i % every == 0 or i == count:
                    samples.append((i, soak.rss_mb(pid)))
                    self.stdout.write(f"{i:6d} {samples[-1][1]:8.0f} MB "
                                      f"({time.perf_counter() - started:.0f} s)")
                    self.stdout.flush()
                    if samples[-1][1] > abort_mb:
                        self.stdout.write(f"above {abort_mb:g} MB: stopped")
                        break
        finally:
            server.stop()
        wall = time.perf_counter() - started
        self.stdout.write("\nrequests      RSS\n" + soak.chart(samples))
        done = samples[-1][0]
        third = [mb for n, mb in samples if n >= done * 2 / 3]
        before = [mb for n, mb in samples if n < done * 2 / 3]
        growth = max(third) - max(before)
        peak = max(mb for _, mb in samples)
        self.stdout.write(
            f"\n{done} requests ({failed} refused) in {wall:.0f} s; RSS at start "
            f"{samples[0][1]:.0f} MB, peak {peak:.0f} MB, end {samples[-1][1]:.0f} MB; "
            f"growth over the last third {growth:+.0f} MB; ceiling {ceiling_mb:g} MB")
        if peak > ceiling_mb or growth > SOAK_GROWTH_MB:
            raise CommandError(f"not bounded: peak {peak:.0f} MB (ceiling {ceiling_mb:g}), "
                               f"last third {growth:+.0f} MB (at most {SOAK_GROWTH_MB})")


def _load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())
