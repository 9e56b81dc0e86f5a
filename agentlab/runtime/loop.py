"""execute(): run one paradigm to its end, whatever happens, and always say how it ended."""

from __future__ import annotations

import asyncio
import time
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from agentlab.guardrails.checks import GuardrailBlocked
from agentlab.llm.errors import LLMError
from agentlab.runtime.answer import answer_from_findings
from agentlab.runtime.limits import BudgetExceeded, LoopDetected, RunCancelled, Totals
from traces.schema import ANSWERED_STATUSES, FINISHED_STATUSES, Step

if TYPE_CHECKING:
    from agentlab.runtime.context import RunContext
    from agentlab.runtime.scopes import ParadigmRun

# The statuses a run ends with here: every finished one but "interrupted" (only a start-up sweep
# writes that, for a run whose process went away). Spelled out for the type checker; the
# statuses themselves are traces.schema's.
FinalStatus = Literal["succeeded", "stopped", "failed", "cancelled", "timed_out"]
assert set(get_args(FinalStatus)) == set(FINISHED_STATUSES) - {"interrupted"}


@dataclass
class RunOutcome:
    status: FinalStatus
    answer: str | None
    error: str | None
    totals: Totals


async def execute(paradigm: ParadigmRun, ctx: RunContext, task: str) -> RunOutcome:
    """Run `paradigm` on `task`; every ending gets a `final` step and a last sink.status()."""
    await ctx.sink.status("running", {})
    started = time.perf_counter()
    status: FinalStatus = "succeeded"
    answer: str | None = None
    error: str | None = None
    error_meta: dict[str, Any] = {}
    # The paradigm runs in its own task so ctx.cancel() can interrupt whatever it awaits.
    inner = asyncio.ensure_future(_guarded(paradigm, ctx, task))
    ctx._task = inner
    timeout = ctx.timeout = asyncio.timeout(ctx.limits.total_timeout_s)
    outer_cancelled = False
    limited = False  # stopped by a limit (time, budget, loop): answer from what was found
    refusal: str | None = None  # a guardrail blocked: its message is the answer
    try:
        async with timeout:
            answer = await inner
    except TimeoutError as exc:
        if timeout.expired():
            status, error = "timed_out", f"timed out after {ctx.limits.total_timeout_s:g} s"
            limited = True
        else:  # a TimeoutError the paradigm let escape is a bug like any other
            status, error = "failed", _describe(exc)
            error_meta = {"exception": type(exc).__name__, "traceback": _tb(exc)}
    except BudgetExceeded as exc:
        status, error, error_meta = exc.status, exc.reason, {"limit": True}
        limited = True
    except LoopDetected as exc:
        status, error, error_meta = "failed", exc.reason, {"loop": True}
        limited = True
    except (RunCancelled, asyncio.CancelledError):
        # ctx.cancel() cancels only `inner`; a cancel of this task itself is re-raised below.
        current = asyncio.current_task()
        outer_cancelled = bool(current and current.cancelling())
        status, error = "cancelled", "the run was cancelled"
    except GuardrailBlocked as exc:
        status, error, refusal = "failed", exc.message, exc.message
        error_meta = {"guardrail": exc.guardrail}
    except LLMError as exc:
        # A model call that ran out of time ends the run as the run's own clock does: one
        # status for one cause ("timed_out"), whichever 60 s ran out first (a profile's
        # timeout_s and an agent's total_timeout_s are both 60 s by default).
        status = "timed_out" if exc.kind == "timeout" else "failed"
        error = str(exc) or exc.kind
        error_meta = {"kind": exc.kind, "retryable": exc.retryable}
    except Exception as exc:
        status, error = "failed", _describe(exc)
        error_meta = {"exception": type(exc).__name__, "traceback": _tb(exc)}
    finally:
        if not inner.done():
            inner.cancel()
    await ctx.close_open_steps(error or "the run ended before this step finished")
    if status != "succeeded":
        if status != "cancelled":
            await ctx.emit(Step(kind="error", text=error or "", status="error",
                                meta={"status": status, **error_meta}), counted=False)
        written = await answer_from_findings(ctx, task, error or status) if limited else None
        if written is not None:
            status, answer = "stopped", written
        elif refusal is not None:
            answer = refusal
        else:
            answer = paradigm.partial_answer(ctx, error or status)
    ctx.totals.wall_ms = (time.perf_counter() - started) * 1000
    answer = answer if isinstance(answer, str) else ("" if answer is None else str(answer))
    await ctx.emit(Step(kind="final", text=answer, output=answer,
                        status="ok" if status in ANSWERED_STATUSES else "error",
                        meta={"status": status, **({"error": error} if error else {}),
                              **({"stopped_by": error} if status == "stopped" else {})}),
                   counted=False)
    totals = ctx.totals.as_dict()
    detail = {"answer": answer, "error": error, "totals": totals}
    if ctx.guard is not None:  # the answer and error as recorded: redacted
        detail = await ctx.guard.adetail(detail)
    await ctx.sink.status(status, detail)
    if outer_cancelled:
        raise asyncio.CancelledError  # someone cancelled the whole task: record, then obey
    return RunOutcome(status=status, answer=detail["answer"], error=detail["error"],
                      totals=ctx.totals)


async def _guarded(paradigm: ParadigmRun, ctx: RunContext, task: str) -> Any:
    """The paradigm's run between the input guardrails and the output judges."""
    await ctx.check_question(task)
    return await ctx.check_answer(await paradigm.run(ctx, task))


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _tb(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))[-4000:]
