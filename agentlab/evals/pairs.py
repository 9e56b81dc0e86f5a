"""One (case, agent) pair of an experiment: its run created, its ending scored, its result
saved; the experiment's progress and end, saved and published.

Shared by the two ways an experiment runs (agentlab/evals/runner.py): in this process, where a
task awaits each pair's run (the embedded default), and on the engine's workers, where each pair
is scored by the worker whose run answered it (agentlab/evals/on_workers.py).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

from channels.layers import get_channel_layer
from django.utils import timezone

from agentlab.evals import scorers
from agentlab.evals.models import (
    FINISHED_RESULT_STATUSES,
    UNFINISHED_RESULT_STATUSES,
    Case,
    Experiment,
    Result,
)
from agentlab.llm.client import OpenAIChatModel
from agentlab.models import ModelProfile
from agentlab.profiles import model_for, to_config
from agentlab.runs import start
from traces.models import Step
from traces.schema import ANSWERED_STATUSES

log = logging.getLogger(__name__)
Progress = Callable[[int, int], Any]


def group_name(experiment_id: int) -> str:
    return f"experiment-{experiment_id}"


def judge_model(profile: ModelProfile | None) -> OpenAIChatModel | None:
    return model_for(to_config(profile)) if profile is not None else None


def begin(experiment_id: int, *, worker: str) -> Experiment:
    """Mark a queued experiment running, owned by `worker` (this process, or the engine's
    workers); returns it as it is now (another process may have begun or ended it)."""
    Experiment.objects.filter(pk=experiment_id, status="queued").update(
        status="running", started_at=timezone.now(), worker=worker)
    return Experiment.objects.select_related("judge_profile").get(pk=experiment_id)


def start_pair(result_id: int, *, worker: str) -> tuple[Result, Case, Any] | None:
    """Claim the pending pair and create its queued run, owned by `worker` (None for the run
    when it cannot be created: `result.error` says why). None when the pair was taken or
    cancelled first."""
    # A conditional update claims the pair, so a cancel that got there first wins.
    if not Result.objects.filter(pk=result_id, status="pending").update(status="running"):
        return None
    result = Result.objects.select_related("case", "agent", "experiment__user").get(pk=result_id)
    if result.experiment.status == "cancelled":
        save(result_id, status="cancelled", error="cancelled before it ran")
        return None
    run = None
    if result.agent is not None:
        try:
            # Its place was taken when the experiment was admitted (evals.views, start.reserve):
            # an experiment's runs are not refused one by one.
            run = start.start_run(result.experiment.user, result.agent, result.case.question,
                                  timeout_cap_s=result.experiment.run_timeout_s, claim=worker,
                                  places=0)
        except ValueError as exc:  # a snapshot that cannot be taken (e.g. a missing member)
            result.error = str(exc)
        else:
            Result.objects.filter(pk=result_id).update(run=run)
    return result, result.case, run


def unstartable(result: Result) -> dict[str, Any]:
    """The error result of a pair whose run could not be created."""
    return {"status": "error",
            "error": f"RuntimeError: {result.error or 'the agent no longer exists'}"}


async def verdict(case: Case, status: str, answer: str | None, error: str | None,
                  judge: OpenAIChatModel | None, *, waited_ms: float = 0.0,
                  wall_ms: float | None = None) -> dict[str, Any]:
    """The result fields of a pair whose run ended with `status`: cancelled, an error (it never
    answered; "model busy" when it timed out after waiting `waited_ms` of its `wall_ms` for
    a shared model's turn: see model_busy), or its answer scored."""
    if status == "cancelled":
        return {"status": "cancelled", "error": error or "the run was cancelled"}
    if status not in ANSWERED_STATUSES:  # a "stopped" run answered: scored
        ended = f"the run {status.replace('_', ' ')}" + (f": {error}" if error else "")
        if model_busy(status, waited_ms, wall_ms):
            return {"status": "error",
                    "error": f"the model was busy: the run waited {waited_ms / 1000:.1f} s of "
                             f"its {(wall_ms or 0) / 1000:.1f} s for other runs' calls, then "
                             f"{ended}. Not counted against the agent.",
                    "scorer_detail": {MODEL_BUSY: True, "waited_ms": round(waited_ms),
                                      "wall_ms": round(wall_ms or 0)}}
        return {"status": "error", "error": ended}
    return await score(case, answer or "", judge)


# A result whose run failed because the model it shared was busy: its scorer_detail has this
# key; it is shown as "model busy" and left out of the mean score and the pass rate
# (evals/summary.py). An error result otherwise (no migration for a new status).
MODEL_BUSY = "model_busy"


def model_busy(status: str, waited_ms: float, wall_ms: float | None) -> bool:
    """Whether a run that ended unanswered failed because the model was busy: it timed out
    having waited for the model's turn (other runs' and chats' calls: agentlab/llm/gate.py)
    at least as long as it ran itself. The wait itself is not charged to its limit; a run
    that still ran out of time after one that long shared a model slowed by the others (one
    request at a time, a prompt another run's call displaced re-read, a cut-off request
    finished before the next), so the case says nothing about the agent: re-run it."""
    return (status == "timed_out" and waited_ms > 0 and wall_ms is not None
            and waited_ms * 2 >= wall_ms)


def waited_ms(run_id: int) -> float:
    """How long a run's model calls waited for their turn (its llm steps' meta.queued_ms):
    the runtime's totals.queued_ms, read back from the record (a run on a worker)."""
    return float(sum((meta or {}).get("queued_ms") or 0 for meta in Step.objects.filter(
        run_id=run_id, kind="llm", meta__has_key="queued_ms").values_list("meta", flat=True)))


async def score(case: Case, answer: str, judge: OpenAIChatModel | None) -> dict[str, Any]:
    try:
        if case.scorer == "llm_judge":
            if judge is None:
                raise scorers.ScorerError("no judge profile: the LLM judge cannot score")
            result = await scorers.judge(judge, question=case.question, expected=case.expected,
                                         rubric=case.rubric, answer=answer)
        else:
            result = await scorers.ascore_answer(case.scorer, answer, case.expected,
                                                 case.tolerance)
    except scorers.JudgeReplyError as exc:
        return {"status": "error", "error": str(exc), "scorer_detail": exc.detail}
    except scorers.ScorerError as exc:
        return {"status": "error", "error": str(exc),
                "scorer_detail": {"scorer": case.scorer}}
    return {"status": "done", "score": result.score, "passed": result.passed,
            "scorer_detail": {**result.detail, "answer_seen": answer[:2000]}}


def save(result_id: int, **fields: Any) -> None:
    Result.objects.filter(pk=result_id).update(finished_at=timezone.now(), **fields)


def finish(experiment_id: int, error: str, interrupted: bool) -> Experiment:
    """The experiment's end: cancelled when interrupted, else failed (an error, or every pair
    failed) or succeeded; a cancelled experiment stays cancelled."""
    experiment = Experiment.objects.get(pk=experiment_id)
    if experiment.status == "running" and interrupted:
        experiment.status = "cancelled"
        experiment.results.filter(status__in=UNFINISHED_RESULT_STATUSES).update(
            status="cancelled", error="cancelled with the experiment", finished_at=timezone.now())
    elif experiment.status == "running":
        results = experiment.results.filter(status__in=FINISHED_RESULT_STATUSES)
        if not error and results.exists() and not results.exclude(status="error").exists():
            first = results.first()
            error = f"every pair failed; the first: {first.error}" if first else ""
        experiment.status = "failed" if error else "succeeded"
    experiment.error = error or experiment.error
    experiment.finished_at = experiment.finished_at or timezone.now()
    experiment.save(update_fields=["status", "error", "finished_at"])
    return experiment


async def report(experiment_id: int, done: int, total: int, result_id: int | None,
                 status: str, on_progress: Progress | None) -> None:
    if on_progress is not None:
        value = on_progress(done, total)
        if inspect.isawaitable(value):
            await value
    await send(experiment_id, {"type": "experiment.progress", "done": done, "total": total,
                               "result_id": result_id, "result_status": status})


async def send(experiment_id: int, message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(group_name(experiment_id), message)
    except Exception:  # a broken channel layer must not lose results already saved
        log.warning("could not publish progress of experiment %s", experiment_id, exc_info=True)
