"""Running an experiment: every (case, agent) pair is a normal recorded run, scored as it ends.

Where its runs execute follows the run engine (agentlab.runs.engine):
- In this process (the embedded default): `run_experiment` awaits the whole experiment in the
  calling task (the terminal command); `start_experiment` launches it as a task of the running
  loop (daphne's), as agentlab.runs.execution.launch does for one run. Pairs run under an
  asyncio.Semaphore(experiment.concurrency); `cancel_experiment` cancels the runs in flight
  here.
- On the engine's workers (the scale profile): nothing of the experiment lives in this process
  (agentlab/evals/on_workers.py). `start_experiment` queues its first runs; each is scored by
  the worker where it ends, which queues the next; `run_experiment` follows it from the
  database; `cancel_experiment` reaches the runs on their workers.

Both ways, a pair that fails (an exception, a failed run, an unscorable answer) becomes an
*error* result with the reason and never stops the others; `cancel_experiment` works from any
thread: pending pairs are cancelled in the database (so no process starts them) and finished
results are kept.

Progress: after each finished pair, on_progress(done, total) is called and the channel group
"experiment-<id>" gets {"type": "experiment.progress", "done", "total", "result_id",
"result_status"}; when the experiment ends it gets {"type": "experiment.status", "status"}.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from agentlab.evals import on_workers, pairs
from agentlab.evals.models import (
    ACTIVE_EXPERIMENT_STATUSES,
    UNFINISHED_RESULT_STATUSES,
    Case,
    Experiment,
    Result,
    Suite,
    clean_tags,
)
from agentlab.evals.pairs import Progress
from agentlab.llm.client import OpenAIChatModel
from agentlab.models import Agent, ModelProfile
from agentlab.runs import engine as run_engine
from agentlab.runs import execution
from agentlab.runs.registry import EXPERIMENTS
from traces.owners import left_by_dead_process, process_id

log = logging.getLogger(__name__)


def on_engine_workers() -> bool:
    """Whether runs execute on the engine's workers rather than in this process."""
    return not run_engine.current().in_this_process


# -- creating ----------------------------------------------------------------------------------

@transaction.atomic
def create_experiment(user: Any, suite: Suite, agents: Sequence[Agent], *, title: str = "",
                      concurrency: int = 2, judge_profile: ModelProfile | None = None,
                      case_limit: int | None = None, run_timeout_s: int | None = None,
                      case_tags: Sequence[str] = (),
                      previous: Experiment | None = None) -> Experiment:
    """A queued experiment with one pending result per (case, agent); ValueError says what is
    missing (no agents, no cases, a judge for llm-judge cases)."""
    if not agents:
        raise ValueError("choose at least one agent")
    if concurrency < 1:
        raise ValueError("the concurrency must be at least 1")
    if run_timeout_s is not None and run_timeout_s < 1:
        raise ValueError("the time limit per run must be at least 1 s")
    experiment = Experiment.objects.create(
        user=user, suite=suite, title=title, concurrency=concurrency,
        judge_profile=judge_profile, case_limit=case_limit or None,
        case_tags=sorted(clean_tags(case_tags)),
        run_timeout_s=run_timeout_s or None, previous=previous)
    experiment.agents.set(agents)
    cases = list(experiment.selected_cases())
    if not cases and experiment.case_tags:
        raise ValueError(f"no case of the suite {suite.name!r} is tagged "
                         f"{' or '.join(experiment.case_tags)}")
    if not cases:
        raise ValueError(f"the suite {suite.name!r} has no cases")
    if judge_profile is None and (n := sum(c.scorer == "llm_judge" for c in cases)):
        raise ValueError(f"{n} case(s) use the LLM judge: choose a judge profile")
    Result.objects.bulk_create([Result(experiment=experiment, case=case, agent=agent,
                                       agent_name=agent.name)
                                for case in cases for agent in agents])
    return experiment


def rerun(experiment: Experiment, user: Any = None) -> Experiment:
    """The same suite, agents (those that still exist) and settings, compared with this one;
    owned by `user` (who asked: staff re-running someone's experiment), else by its owner."""
    return create_experiment(
        user or experiment.user, experiment.suite, list(experiment.agents.order_by("name")),
        title=experiment.title, concurrency=experiment.concurrency,
        judge_profile=experiment.judge_profile, case_limit=experiment.case_limit,
        case_tags=experiment.case_tags, run_timeout_s=experiment.run_timeout_s,
        previous=experiment)


# -- control -----------------------------------------------------------------------------------

@dataclass
class Control:
    """This process's handle on a running experiment (cancel reaches its runs through it); the
    experiment's entry in agentlab.runs.registry.EXPERIMENTS holds it while its pairs run."""

    experiment_id: int
    loop: asyncio.AbstractEventLoop
    cancelled: bool = False
    runs: set[int] = field(default_factory=set)

    def cancel(self) -> None:  # on the loop's thread
        self.cancelled = True
        for run_id in list(self.runs):
            execution.cancel(run_id)


def start_experiment(experiment: Experiment) -> asyncio.Task[Experiment]:
    """Run `experiment` as a task of this process's running loop; on the workers, the task only
    queues its first runs (the workers take it from there)."""
    pk = experiment.pk
    work = on_workers.begin(pk) if on_engine_workers() else run_experiment(pk)
    task = asyncio.get_running_loop().create_task(work, name=f"experiment-{pk}")
    EXPERIMENTS.put(pk, task=task)
    task.add_done_callback(lambda _t: EXPERIMENTS.clear(pk, "task", only=task))
    return task


def cancel_experiment(experiment_id: int) -> bool:
    """Cancel the pending and running pairs (finished results stay); False when the
    experiment had already ended. Safe from any thread (not from async code: use
    acancel_experiment there)."""
    with transaction.atomic():
        changed = Experiment.objects.filter(
            pk=experiment_id, status__in=ACTIVE_EXPERIMENT_STATUSES
        ).update(status="cancelled", finished_at=timezone.now())
        Result.objects.filter(experiment_id=experiment_id, status="pending").update(
            status="cancelled", error="cancelled before it ran", finished_at=timezone.now())
    entry = EXPERIMENTS.entry(experiment_id)
    if entry is not None and (control := entry.control) is not None:
        control.loop.call_soon_threadsafe(control.cancel)
    if changed and on_engine_workers():
        on_workers.cancel_runs(experiment_id)
    return bool(changed)


acancel_experiment = sync_to_async(cancel_experiment)


# -- running -----------------------------------------------------------------------------------

async def run_experiment(experiment_id: int, *, on_progress: Progress | None = None,
                         on_result: Callable[[Result, int, int], Any] | None = None
                         ) -> Experiment:
    """Run every pending pair of the experiment to its end; returns the updated row.
    `on_result(result, done, total)` sees each finished Result (case and run loaded), before
    on_progress(done, total). On the workers, this follows the experiment they run."""
    if on_engine_workers():
        return await on_workers.follow(experiment_id, on_progress=on_progress,
                                       on_result=on_result)
    experiment = await sync_to_async(pairs.begin)(experiment_id, worker=process_id())
    if experiment.status != "running":  # cancelled before it started, or already over
        return experiment
    control = Control(experiment_id, asyncio.get_running_loop())
    EXPERIMENTS.put(experiment_id, control=control)
    error, interrupted = "", False
    try:
        pending, done, total, judge = await sync_to_async(_plan)(experiment)
        limit = asyncio.Semaphore(max(1, experiment.concurrency))
        counter = {"done": done}

        async def one(result_id: int) -> None:
            async with limit:
                status = await _pair(result_id, control, judge)
            if status is None:  # cancelled before it started (counted by cancel's report)
                return
            counter["done"] += 1
            if on_result is not None:
                on_result(await sync_to_async(
                    Result.objects.select_related("case", "run").get)(pk=result_id),
                    counter["done"], total)
            await pairs.report(experiment_id, counter["done"], total, result_id, status,
                               on_progress)

        await asyncio.gather(*(one(pk) for pk in pending))
        if control.cancelled:
            done, total = await sync_to_async(lambda: experiment.progress())()
            await pairs.report(experiment_id, done, total, None, "cancelled", on_progress)
    except asyncio.CancelledError:  # the task itself was cancelled (shutdown): so is this
        interrupted = True
        raise
    except Exception as exc:  # the orchestration itself broke: say so on the experiment
        log.exception("experiment %s failed", experiment_id)
        error = f"{type(exc).__name__}: {exc}"
    finally:
        EXPERIMENTS.clear(experiment_id, "control", only=control)
        experiment = await asyncio.shield(sync_to_async(pairs.finish)(experiment_id, error,
                                                                        interrupted))
    await pairs.send(experiment_id, {"type": "experiment.status", "status": experiment.status})
    return experiment


def mark_interrupted() -> int:
    """Experiments left running by a dead process (traces.owners: judged by process identity)
    become `interrupted`: their finished results stay, the rest are cancelled (a re-run runs
    them all again). Every starting process calls it once (traces.startup). An experiment on
    the workers belongs to no process (its `worker` is "engine:…"), so it is never judged."""
    dead = [e.pk for e in Experiment.objects.filter(status="running").only("pk", "worker")
            if left_by_dead_process(e.worker)]
    now = timezone.now()
    with transaction.atomic():
        Result.objects.filter(experiment__in=dead, status__in=UNFINISHED_RESULT_STATUSES).update(
            status="cancelled", error="the process running the experiment stopped",
            finished_at=now)
        return Experiment.objects.filter(pk__in=dead, status="running").update(
            status="interrupted", finished_at=now,
            error="The process running this experiment stopped before it finished.")


def _plan(experiment: Experiment) -> tuple[list[int], int, int, OpenAIChatModel | None]:
    # Pairs left "running" by an earlier attempt start again from scratch.
    experiment.results.filter(status="running").update(status="pending")
    pending = list(experiment.results.filter(status="pending")
                   .order_by("case__position", "case_id", "agent_name")
                   .values_list("pk", flat=True))
    done, total = experiment.progress()
    return pending, done, total, pairs.judge_model(experiment.judge_profile)


async def _pair(result_id: int, control: Control, judge: OpenAIChatModel | None
                ) -> str | None:
    """Run and score one pair; returns the result's final status (None: it never started)."""
    if control.cancelled:
        return None
    started = await sync_to_async(_start_pair)(result_id)
    if started is None:
        return None
    result, case, run = started
    fields: dict[str, Any]
    try:
        if run is None:
            fields = pairs.unstartable(result)
        else:
            control.runs.add(run.pk)
            try:
                outcome = await execution.execute_run(run)
            finally:
                control.runs.discard(run.pk)
            fields = await pairs.verdict(case, outcome.status, outcome.answer, outcome.error,
                                         judge, waited_ms=outcome.totals.queued_ms,
                                         wall_ms=outcome.totals.wall_ms)
    except asyncio.CancelledError:
        await asyncio.shield(sync_to_async(pairs.save)(result.pk, status="cancelled",
                                                       error="cancelled while it ran"))
        raise
    except Exception as exc:  # one pair's failure is its own result, never the experiment's
        fields = {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
    await sync_to_async(pairs.save)(result.pk, **fields)
    return fields["status"]


def _start_pair(result_id: int) -> tuple[Result, Case, Any] | None:
    """The pair's run, claimed by this process (it executes it)."""
    return pairs.start_pair(result_id, worker=process_id())
