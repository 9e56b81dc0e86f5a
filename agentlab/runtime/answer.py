"""The answer a run gives when a limit stops it: one last call, without tools, that writes the
answer from the observations gathered so far (the run's status is then "stopped"). The trace
shows it as an `llm` step with `meta.answer_after_stop` (the limit that stopped the run)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from agentlab.llm.errors import LLMError
from agentlab.runtime import window

if TYPE_CHECKING:
    from agentlab.runtime.context import RunContext

GRACE_S = 30.0  # the time the answer may take after the run's own time is up
MAX_TOKENS = 160
MAX_FINDINGS = 6
FINDING_CHARS = 600
SYSTEM = ("The question below was being worked on, and it had to stop. Answer it from the "
          "tool results alone, in one sentence. Give the facts it asks for (names, numbers and "
          "units exactly as written). If they do not answer it, say what is missing.")
# ("In a few words: the fact it asks for" made the 135M model repeat the question back.)


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= FINDING_CHARS else text[: FINDING_CHARS - 1] + "…"


def messages_for(task: str, findings: list[str]) -> list[dict[str, str]]:
    """The prompt of the last call: the question and the latest tool results, nothing else."""
    results = "\n".join(f"- {_clip(f)}" for f in findings[-MAX_FINDINGS:])
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Question: {task}\n\nTool results:\n{results}\n\n"
                                        "Answer:"}]


async def answer_from_findings(ctx: RunContext, task: str, reason: str) -> str | None:
    """The answer written from `ctx.findings`, or None when there is nothing to write it from
    or the call fails (the run then ends as it would have: failed or timed out)."""
    findings = [f for f in ctx.findings if f.strip()]
    if not findings or ctx.cancelled:
        return None
    try:
        async with asyncio.timeout(GRACE_S):
            with ctx.answering():
                result = await ctx.llm("agent", messages_for(task, findings),
                                       max_tokens=MAX_TOKENS,
                                       meta={"answer_after_stop": reason})
    except (LLMError, TimeoutError, window.PromptTooLong):
        await ctx.close_open_steps("the answer after the stop did not come in time")
        return None
    except Exception:  # noqa: BLE001 (whatever breaks here, the run still ends as it was)
        await ctx.close_open_steps("the answer after the stop failed")
        return None
    answer = (result.text or "").strip()
    return answer or None
