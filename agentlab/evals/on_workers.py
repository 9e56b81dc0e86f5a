"""An experiment whose runs the engine's workers execute (the scale profile): nothing of it lives
in the web process that started it, so it goes on when that process stops.

- `begin` marks the experiment running and `advance` fills its places: up to `concurrency`
  pairs at once, each a queued run submitted to the engine (agentlab.runs.engine). The pairs
  are claimed and counted with the experiment's row locked, so processes advancing it at the
  same moment never run more than that.
- `settle(run_id)` is called by the worker whose job executed the run, when it ends (and by a
  retried job that finds its run already over: a worker stopped between the two). A run that
  answers a pair is scored there, from its row (status, answer, error), its result saved once,
  the progress published to "experiment-<id>", and the experiment advanced: the next pending
  pair is queued or, with nothing pending or running, the experiment ends.
- `cancel_runs` (after agentlab.evals.runner.cancel_experiment cancelled the pending pairs)
  cancels the runs in flight: a queued one in the database (its job then finds it over), a
  started one on the worker holding it (through the relay, as a browser's cancel goes).
- `follow` is run_experiment's part here (the terminal command): it begins the experiment
  and reads its results from the database as they finish, until it ends.

The experiment's and its queued runs' `worker` is "engine:<the process that queued them>": the
start-up sweeps (traces.startup, agentlab.evals.runner.mark_interrupted) leave those to the
engine, whose jobs are durable and taken over when a worker stops.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.db import transaction
from django.utils import timezone

from agentlab.evals import pairs
from agentlab.evals.models import FINISHED_RESULT_STATUSES, Experiment, Result
from agentlab.runs import control as run_control
from agentlab.runs import engine
from traces.models import Run
from traces.owners import WORKER_PREFIX, process_id
from traces.schema import FINISHED_STATUSES

log = logging.getLogger(__name__)
POLL_S = 0.5  # how often `follow` reads the results


def _owner() -> str:
    return WORKER_PREFIX + process_id()


async def begin(experiment_id: int) -> Experiment:
    """Mark the experiment running (if it was queued) and queue its first runs."""
    experiment = await sync_to_async(pairs.begin)(experiment_id, worker=_owner())
    if experiment.status == "running":
        await advance(experiment_id)
    return experiment


# -- advancing -----------------------------------------------------------------------------------

@dataclass
class Filled:
    """What one `_fill` did: runs to submit, pairs that ended at once, the experiment's end."""

    runs: list[Run] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)  # results whose run could not be created
    ended: str | None = None  # the experiment's final status, when it ended now


async def advance(experiment_id: int) -> None:
    """Queue runs for the pending pairs while the experiment has room; end it when nothing is
    pending or running."""
    filled = await sync_to_async(_fill)(experiment_id)
    for run in filled.runs:
        await engine.submit(run)
    for result_id in filled.failed:
        await _progress(experiment_id, result_id, "error")
    if filled.ended is not None:
        await pairs.send(experiment_id, {"type": "experiment.status", "status": filled.ended})


def _fill(experiment_id: int) -> Filled:
    filled = Filled()
    with transaction.atomic():
        experiment = Experiment.objects.select_for_update().get(pk=experiment_id)
        if experiment.status != "running":
            return filled
        running = experiment.results.filter(status="running").count()
        pending = experiment.results.filter(status="pending").order_by(
            "case__position", "case_id", "agent_name").values_list("pk", flat=True)
        for result_id in pending.iterator():
            if running >= max(1, experiment.concurrency):
                break
            started = pairs.start_pair(result_id, worker=_owner())
            if started is None:
                continue
            result, _case, run = started
            if run is None:
                pairs.save(result_id, **pairs.unstartable(result))
                filled.failed.append(result_id)
            else:
                filled.runs.append(run)
                running += 1
        if running == 0 and not experiment.results.filter(status="pending").exists():
            filled.ended = pairs.finish(experiment_id, "", interrupted=False).status
    return filled


# -- where a run ends ----------------------------------------------------------------------------

async def settle(run_id: int) -> None:
    """Score the pair that run `run_id` answers, once its run has ended, then advance the
    experiment; nothing for a run that answers no pair, or one settled already."""
    found = await sync_to_async(_ended_pair)(run_id)
    if found is None:
        return
    result, run = found
    judge = await sync_to_async(pairs.judge_model)(result.experiment.judge_profile)
    waited = await sync_to_async(pairs.waited_ms)(run.pk)
    fields = await pairs.verdict(result.case, run.status, run.final_answer, run.error, judge,
                                 waited_ms=waited, wall_ms=run.wall_ms)
    if not await sync_to_async(_save_once)(result.pk, fields):
        return  # another worker settled it meanwhile
    await _progress(result.experiment_id, result.pk, fields["status"])
    await advance(result.experiment_id)


def _ended_pair(run_id: int) -> tuple[Result, Run] | None:
    result = (Result.objects.filter(run_id=run_id, status="running")
              .select_related("case", "experiment__judge_profile", "run").first())
    if result is None or result.run is None or result.run.status not in FINISHED_STATUSES:
        return None
    return result, result.run


def _save_once(result_id: int, fields: dict[str, Any]) -> bool:
    return bool(Result.objects.filter(pk=result_id, status="running").update(
        finished_at=timezone.now(), **fields))


async def _progress(experiment_id: int, result_id: int, status: str) -> None:
    done, total = await sync_to_async(
        lambda: Experiment.objects.get(pk=experiment_id).progress())()
    await pairs.report(experiment_id, done, total, result_id, status, None)


# -- cancelling ----------------------------------------------------------------------------------

def cancel_runs(experiment_id: int) -> None:
    """Cancel the runs of the experiment's running pairs (sync: from any thread)."""
    runs = list(Result.objects.filter(experiment_id=experiment_id, status="running",
                                      run__isnull=False).values_list("pk", "run_id"))
    held = []
    for result_id, run_id in runs:
        # Not claimed by a worker yet (agentlab.workers.job.claim gives it a start): cancelled
        # here, so its job finds it over and settles nothing.
        if Run.objects.filter(pk=run_id, status="queued", started_at__isnull=True).update(
                status="cancelled", error="cancelled with the experiment",
                finished_at=timezone.now()):
            pairs.save(result_id, status="cancelled", error="cancelled before it ran")
        else:
            held.append(run_id)
    if held:
        async_to_sync(_cancel_on_workers)(held)


async def _cancel_on_workers(run_ids: list[int]) -> None:
    async def cancel(run_id: int) -> None:
        try:
            await engine.control(run_id, {"action": "cancel"})
        except run_control.ControlError as exc:  # it just ended, or is between two workers
            log.info("run %s of a cancelled experiment: %s", run_id, exc)

    await asyncio.gather(*(cancel(run_id) for run_id in run_ids))


# -- following from the terminal -----------------------------------------------------------------

async def follow(experiment_id: int, *, on_progress: pairs.Progress | None = None,
                 on_result: Callable[[Result, int, int], Any] | None = None) -> Experiment:
    """Begin the experiment and wait for its end, calling on_result / on_progress for each
    result as it finishes (read from the database: the workers run it)."""
    experiment = await begin(experiment_id)
    seen = set(await sync_to_async(_finished)(experiment_id))
    while True:
        experiment = await Experiment.objects.aget(pk=experiment_id)
        new = [r for r in await sync_to_async(_finished_results)(experiment_id)
               if r.pk not in seen]
        done, total = await sync_to_async(experiment.progress)()
        for i, result in enumerate(new, start=done - len(new) + 1):
            seen.add(result.pk)
            if on_result is not None:
                on_result(result, i, total)
            if on_progress is not None:
                value = on_progress(i, total)
                if inspect.isawaitable(value):
                    await value
        if not experiment.is_active:
            return experiment
        await asyncio.sleep(POLL_S)


def _finished(experiment_id: int) -> list[int]:
    return list(Result.objects.filter(experiment_id=experiment_id,
                                      status__in=FINISHED_RESULT_STATUSES)
                .values_list("pk", flat=True))


def _finished_results(experiment_id: int) -> list[Result]:
    return list(Result.objects.filter(experiment_id=experiment_id,
                                      status__in=FINISHED_RESULT_STATUSES)
                .select_related("case", "run").order_by("finished_at", "pk"))
