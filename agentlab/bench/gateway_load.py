"""The clients of `manage.py bench_gateway`: the real openai SDK (AsyncOpenAI, one client and
so one connection pool per simulated agent, no retries), one event loop for all of them.

Each call is what an agent's loop sends: a system prompt, a question and one tool. A client's
calls carry a W3C `traceparent`, a new trace every `calls_per_run` calls (one agent run each;
the direct server and LiteLLM ignore it). The figures per call: the non-streamed call's total
time, and the streamed call's time to its first token (the first chunk with text); a streamed
call is read to its end before the next starts, as an agent does.

The targets take turns in rounds (a batch of each, the order rotated each round), so a change
in the machine's load falls on all of them alike.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any

from openai import APIError, AsyncOpenAI

from agentlab.bench.gateway import Endpoint

SYSTEM = ("You are a careful assistant. Think step by step, call a tool when it helps, and "
          "answer in one short sentence once you know the answer. " * 4).strip()
MESSAGES = [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": "What is 6 times 7, plus the number of moons of Mars?"}]
TOOLS = [{"type": "function", "function": {
    "name": "calculator", "description": "Evaluate an arithmetic expression.",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
                   "required": ["expression"]}}}]
MODES = (False, True)  # non-streamed, streamed


@dataclass
class Sample:
    """What a series of calls of one mode took, on one endpoint at one level."""

    ms: list[float] = field(default_factory=list)  # total (non-streamed) or TTFT (streamed)
    errors: int = 0
    first_error: str = ""
    cpu_ms: float = 0.0  # the endpoint's own processes, over these calls

    def add(self, other: Sample) -> None:
        self.ms += other.ms
        self.errors += other.errors
        self.first_error = self.first_error or other.first_error
        self.cpu_ms += other.cpu_ms

    def as_dict(self) -> dict[str, Any]:
        return {"ms": self.ms, "errors": self.errors, "first_error": self.first_error,
                "cpu_ms": self.cpu_ms}


class Agents:
    """`n` clients of one endpoint, each with its own connections, as `n` agents would be."""

    def __init__(self, endpoint: Endpoint, n: int, calls_per_run: int) -> None:
        self.endpoint, self.calls_per_run = endpoint, calls_per_run
        self.clients = [AsyncOpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key,
                                    max_retries=0, timeout=60) for _ in range(n)]
        self.sent = [0] * n
        self.traces = [random.getrandbits(128) for _ in range(n)]

    def headers(self, i: int) -> dict[str, str]:
        if self.sent[i] and self.sent[i] % self.calls_per_run == 0:
            self.traces[i] = random.getrandbits(128)  # the next agent run
        self.sent[i] += 1
        return {"traceparent": f"00-{self.traces[i]:032x}-{random.getrandbits(64):016x}-01"}

    async def call(self, i: int, stream: bool) -> float:
        """One call's figure in ms: the total, or (streamed) the time to the first token."""
        client, headers = self.clients[i], self.headers(i)
        began = time.perf_counter()
        if not stream:
            reply = await client.chat.completions.create(
                model=self.endpoint.model, messages=MESSAGES, tools=TOOLS,
                extra_headers=headers)
            if not reply.choices:
                raise ValueError("a reply without choices")
            return (time.perf_counter() - began) * 1000
        first = None
        chunks = await client.chat.completions.create(
            model=self.endpoint.model, messages=MESSAGES, tools=TOOLS, stream=True,
            stream_options={"include_usage": True}, extra_headers=headers)
        async for chunk in chunks:
            if first is None and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter()
        if first is None:
            raise ValueError("a stream without text")
        return (first - began) * 1000

    async def batch(self, per_client: int, stream: bool, stagger_s: float = 0.0) -> Sample:
        """Every client makes `per_client` calls one after another, all clients at once; the
        i-th starts i/n of `stagger_s` late (agents do not call in step: started together, 50
        clients of a paced model would send 50 requests at the same instant each time)."""
        sample = Sample()

        async def agent(i: int) -> None:
            await asyncio.sleep(stagger_s * i / len(self.clients))
            for _ in range(per_client):
                try:
                    sample.ms.append(await self.call(i, stream))
                except (APIError, ValueError) as exc:
                    sample.errors += 1
                    sample.first_error = sample.first_error or f"{type(exc).__name__}: {exc}"

        cpu = self.endpoint.cpu_ms()
        await asyncio.gather(*(agent(i) for i in range(len(self.clients))))
        sample.cpu_ms = self.endpoint.cpu_ms() - cpu
        return sample

    async def close(self) -> None:
        for client in self.clients:
            await client.close()


Figures = dict[str, dict[int, dict[bool, Sample]]]  # endpoint → clients → streamed → sample


async def measure(endpoints: list[Endpoint], level: int, per_client: int, rounds: int,
                  warmup: int, calls_per_run: int, figures: Figures, stagger_s: float = 0.0,
                  say: Any = print) -> None:
    """`level` clients per endpoint, `per_client` calls each per mode, over `rounds` rounds;
    first `warmup` calls per client and mode, not counted (connections, first imports); the
    clients' starts spread over `stagger_s`."""
    agents = [Agents(e, level, calls_per_run) for e in endpoints]
    try:
        for a in agents:
            for stream in MODES:
                await a.batch(warmup, stream, stagger_s)
        shares = [per_client // rounds + (r < per_client % rounds) for r in range(rounds)]
        for r, share in enumerate(shares):
            if not share:
                continue
            for a in agents[r % len(agents):] + agents[:r % len(agents)]:
                for stream in MODES:
                    got = await a.batch(share, stream, stagger_s)
                    mine = figures.setdefault(a.endpoint.name, {}).setdefault(level, {})
                    mine.setdefault(stream, Sample()).add(got)
            say(f"  round {r + 1}/{rounds} done")
    finally:
        for a in agents:
            await a.close()
