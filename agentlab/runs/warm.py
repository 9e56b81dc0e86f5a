"""Warm an agent's prompt on the model server before anyone asks it something.

A run's first call sends the agent's whole prompt: system prompt, tool list, few-shot turns —
some 500 tokens for the default ReAct agents, which the embedded model needs seconds to read
on two cores. Every later call of any run of that agent begins with the same tokens, and the
server keeps what it has read (llama.cpp's prompt cache, agentlab.llm.local_server). So a
command that starts the embedded model (`serve`, `bench_llm`, `run_experiment`) sends each
agent's first request once, as a run would send it — built by the agent's own paradigm, sent
by its own client — with a one-token reply: the first question a person asks then costs only
its own words.

Nothing is recorded: the warm-up is not a run (no row, no trace, no cost in any total).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from agentlab.paradigms.registry import get_paradigm
from agentlab.runs.build import build_context
from agentlab.runs.snapshot import snapshot
from agentlab.runtime.loop import execute
from agentlab.runtime.sinks import MemorySink

log = logging.getLogger(__name__)
QUESTION = "Hello"  # the words after the prefix that is warmed; any question will do


class Warmed(Exception):
    """The first call went out: the warm-up of this agent is over."""


class FirstCallOnly:
    """A run's model whose first call goes to the server for one token, then ends the run."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self.sent = False

    def __getattr__(self, name: str) -> Any:  # profile_name, window: the real model's
        return getattr(self._model, name)

    async def chat(self, messages: list[dict[str, Any]], **options: Any) -> Any:
        await self._model.chat(messages, **{**options, "max_tokens": 1, "on_token": None})
        self.sent = True
        raise Warmed


def warm(agent: Any) -> float:
    """Send `agent`'s first request once (synchronous: it reads the agent's rows, then runs
    the call on its own event loop; for commands, not for a running loop); the seconds it
    took. An agent whose first call fails (the server is down, a snapshot that cannot be
    built) is logged and skipped: warming never stops a command."""
    started = time.perf_counter()
    try:
        sent, outcome = asyncio.run(_first_call(snapshot(agent), agent.paradigm))
    except Exception:  # a configuration the warm-up cannot build is the run's to report
        log.warning("could not warm agent %r", agent.name, exc_info=True)
    else:
        if not sent:
            log.warning("warming agent %r: %s", agent.name, outcome.error)
    return time.perf_counter() - started


async def _first_call(snap: dict[str, Any], paradigm: str) -> tuple[bool, Any]:
    """Whether a first call went out, and how the cut-short run ended."""
    ctx = build_context(snap, sink=MemorySink(), is_superuser=True)
    models = [FirstCallOnly(model) for model in ctx.models.values()]
    ctx.models = dict(zip(ctx.models, models, strict=True))
    outcome = await execute(get_paradigm(paradigm)(), ctx, QUESTION)
    return any(m.sent for m in models), outcome
