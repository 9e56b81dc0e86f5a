"""Pieces the runtime tests share: two tools (lookup, nap) and Scripted, a paradigm whose run
is the coroutine it is given."""

from __future__ import annotations

import asyncio
from typing import ClassVar

from agentlab.paradigms.registry import Paradigm
from agentlab.tools.decorator import tool


@tool
def lookup(city: str) -> str:
    """Look up the population of a city."""
    return {"paris": "Paris has 2.1 million people."}.get(city.lower(), "No results")


@tool
async def nap(seconds: float) -> str:
    """Sleep for a while."""
    await asyncio.sleep(seconds)
    return "rested"


class Scripted(Paradigm):
    key: ClassVar[str] = "test-scripted"

    def __init__(self, body) -> None:
        self.body = body

    async def run(self, ctx, task: str) -> str:
        return await self.body(ctx, task)
