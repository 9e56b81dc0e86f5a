"""Another Agent Lab process, for the cross-process tests: `python -m tests.other_process RUN`
records a short run (steps, tokens, its end) through the real Recorder, with the database
and the Redis channel layer of its environment (DATABASE_URL, REDIS_URL), then exits once
everything it published has left for the layer."""

from __future__ import annotations

import asyncio
import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentlab.settings")

TOKENS = ("six ", "times ", "seven")


async def record(run_id: int) -> None:
    from agentlab.runs.recorder import Recorder
    from agentlab.runs.registry import REGISTRY
    from tests.waiting import await_until
    from traces.schema import Step

    recorder = Recorder(run_id)
    await recorder.status("running", {})
    await recorder.step(Step(seq=1, kind="llm", name="m", status="running"))
    for piece in TOKENS:
        await recorder.token(1, piece)
    await recorder.step(Step(seq=1, kind="llm", name="m", status="ok", text="".join(TOKENS)))
    await recorder.step(Step(seq=2, kind="tool", name="calculator", parent=1, status="ok",
                             input={"expression": "6*7"}, text="42"))
    await recorder.step(Step(seq=3, kind="final", status="ok", text="42"))
    await recorder.status("succeeded", {"answer": "42", "totals": {"llm_calls": 1,
                                                                   "tool_calls": 1}})
    await await_until(lambda: not REGISTRY.sending(), timeout=20,
                      message="every event left for the channel layer")


def main() -> None:
    import django

    django.setup()
    asyncio.run(record(int(sys.argv[1])))


if __name__ == "__main__":
    main()
