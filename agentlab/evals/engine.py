"""Running an experiment: every (case, agent) pair is a normal recorded run, scored as it ends.

`run_experiment` awaits the whole experiment in the calling task (the terminal command);
`start_experiment` launches it as a task of the running loop (daphne's), as
agentlab.runs.tasks.launch does for one run. Pairs run under an
asyncio.Semaphore(experiment.concurrency); a pair that fails (an exception, a failed run, an
unscorable answer) becomes an *error* result with the reason and never stops the others.
`cancel_experiment` works from any thread: pending pairs are cancelled in the database (so a
process that runs the experiment elsewhere skips them too) and the runs in flight here are
cancelled; finished results are kept.

Progress: after each finished pair, on_progress(done, total) is called and the channel group
"experiment-<id>" gets {"type": "experiment.progress", "done", "total", "result_id",
"result_status"}; when the experiment ends it gets {"type": "experiment.status", "status"}.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import transaction
from django.utils import timezone

from agentlab.evals import scorers
from agentlab.evals.models import FINISHED_RESULT_STATUSES, Case, Experiment, Result, Suite
from agentlab.llm.client import OpenAIChatModel
from agentlab.models import Agent, ModelProfile
from agentlab.profiles import to_config
from agentlab.runs import tasks
from agentlab.runs.snapshot import create_run
from traces.schema import ANSWERED_STATUSES
from traces.workers import left_by_dead_process, worker_id

log = logging.getLogger(__name__)
Progress = Callable[[int, int], Any]


def group_name(experiment_id: int) -> str:
    return f"experiment-{experiment_id}"


# -- creating ----------------------------------------------------------------------------------

@transaction.atomic
def create_experiment(user: Any, suite: Suite, agents: Sequence[Agent], *, title: str = "",
                      concurrency: int = 2, judge_profile: ModelProfile | None = None,
                      case_limit: int | None = None, run_timeout_s: int | None = None,
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
        run_timeout_s=run_timeout_s or None, previous=previous)
    experiment.agents.set(agents)
    cases = list(experiment.selected_cases())
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
        run_timeout_s=experiment.run_timeout_s, previous=experiment)


# -- control -----------------------------------------------------------------------------------

@dataclass
class Control:
    """This process's handle on a running experiment (cancel reaches its runs through it)."""

    experiment_id: int
    loop: asyncio.AbstractEventLoop
    cancelled: bool = False
    runs: set[int] = field(default_factory=set)

    def cancel(self) -> None:  # on the loop's thread
        self.cancelled = True
        for run_id in list(self.runs):
            tasks.cancel(run_id)


CONTROLS: dict[int, Control] = {}
TASKS: dict[int, asyncio.Task[Experiment]] = {}


def start_experiment(experiment: Experiment) -> asyncio.Task[Experiment]:
    """Run `experiment` as a task of this process's running loop."""
    pk = experiment.pk
    task = asyncio.get_running_loop().create_task(run_experiment(pk), name=f"experiment-{pk}")
    TASKS[pk] = task
    task.add_done_callback(lambda _t: TASKS.pop(pk, None))
    return task


def cancel_experiment(experiment_id: int) -> bool:
    """Cancel the pending and running pairs (finished results stay); False when the
    experiment had already ended. Safe from any thread (not from async code: use
    acancel_experiment there)."""
    with transaction.atomic():
        changed = Experiment.objects.filter(
            pk=experiment_id, status__in=("queued", "running")
        ).update(status="cancelled", finished_at=timezone.now())
        Result.objects.filter(experiment_id=experiment_id, status="pending").update(
            status="cancelled", error="cancelled before it ran", finished_at=timezone.now())
    if (control := CONTROLS.get(experiment_id)) is not None:
        control.loop.call_soon_threadsafe(control.cancel)
    return bool(changed)


acancel_experiment = sync_to_async(cancel_experiment)


# -- running -----------------------------------------------------------------------------------

async def run_experiment(experiment_id: int, *, on_progress: Progress | None = None,
                         on_result: Callable[[Result, int, int], Any] | None = None
                         ) -> Experiment:
    """Run every pending pair of the experiment to its end; returns the updated row.
    `on_result(result, done, total)` sees each finished Result (case and run loaded), before
    on_progress(done, total)."""
    experiment = await sync_to_async(_begin)(experiment_id)
    if experiment.status != "running":  # cancelled before it started, or already over
        return experiment
    control = CONTROLS[experiment_id] = Control(experiment_id, asyncio.get_running_loop())
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
            await _report(experiment_id, counter["done"], total, result_id, status,
                          on_progress)

        await asyncio.gather(*(one(pk) for pk in pending))
        if control.cancelled:
            done, total = await sync_to_async(lambda: experiment.progress())()
            await _report(experiment_id, done, total, None, "cancelled", on_progress)
    except asyncio.CancelledError:  # the task itself was cancelled (shutdown): so is this
        interrupted = True
        raise
    except Exception as exc:  # the orchestration itself broke: say so on the experiment
        log.exception("experiment %s failed", experiment_id)
        error = f"{type(exc).__name__}: {exc}"
    finally:
        CONTROLS.pop(experiment_id, None)
        experiment = await asyncio.shield(sync_to_async(_finish)(experiment_id, error,
                                                                   interrupted))
    await _send(experiment_id, {"type": "experiment.status", "status": experiment.status})
    return experiment


def _begin(experiment_id: int) -> Experiment:
    experiment = Experiment.objects.select_related("judge_profile").get(pk=experiment_id)
    if experiment.status == "queued":
        experiment.status, experiment.started_at = "running", timezone.now()
        experiment.worker = worker_id()
        experiment.save(update_fields=["status", "started_at", "worker"])
    return experiment


def mark_interrupted() -> int:
    """Experiments left running by a dead process (traces.workers: judged by process identity)
    become `interrupted`: their finished results stay, the rest are cancelled (a re-run runs
    them all again). Every starting process calls it once (traces.startup)."""
    dead = [e.pk for e in Experiment.objects.filter(status="running").only("pk", "worker")
            if left_by_dead_process(e.worker)]
    now = timezone.now()
    with transaction.atomic():
        Result.objects.filter(experiment__in=dead, status__in=("pending", "running")).update(
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
    profile = experiment.judge_profile
    return pending, done, total, OpenAIChatModel(to_config(profile)) if profile else None


def _finish(experiment_id: int, error: str, interrupted: bool) -> Experiment:
    experiment = Experiment.objects.get(pk=experiment_id)
    if experiment.status == "running" and interrupted:
        experiment.status = "cancelled"
        experiment.results.filter(status__in=("pending", "running")).update(
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
            raise RuntimeError(result.error or "the agent no longer exists")
        control.runs.add(run.pk)
        try:
            outcome = await tasks.execute_run(run)
        finally:
            control.runs.discard(run.pk)
        if outcome.status == "cancelled":
            fields = {"status": "cancelled", "error": outcome.error or "the run was cancelled"}
        elif outcome.status not in ANSWERED_STATUSES:  # a "stopped" run answered: scored
            fields = {"status": "error", "error": f"the run {outcome.status.replace('_', ' ')}"
                      + (f": {outcome.error}" if outcome.error else "")}
        else:
            fields = await _score(case, outcome.answer or "", judge)
    except asyncio.CancelledError:
        await asyncio.shield(sync_to_async(_save)(result.pk, status="cancelled",
                                                  error="cancelled while it ran"))
        raise
    except Exception as exc:  # one pair's failure is its own result, never the experiment's
        fields = {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
    await sync_to_async(_save)(result.pk, **fields)
    return fields["status"]


def _start_pair(result_id: int) -> tuple[Result, Case, Any] | None:
    # A conditional update claims the pair, so a cancel that got there first wins.
    if not Result.objects.filter(pk=result_id, status="pending").update(status="running"):
        return None
    result = Result.objects.select_related("case", "agent", "experiment__user").get(pk=result_id)
    if result.experiment.status == "cancelled":
        _save(result_id, status="cancelled", error="cancelled before it ran")
        return None
    run = None
    if result.agent is not None:
        try:
            run = create_run(result.agent, result.experiment.user, result.case.question,
                                    timeout_cap_s=result.experiment.run_timeout_s,
                                    worker=worker_id())
        except ValueError as exc:  # a snapshot that cannot be taken (e.g. a missing member)
            result.error = str(exc)
        else:
            Result.objects.filter(pk=result_id).update(run=run)
    return result, result.case, run


async def _score(case: Case, answer: str, judge: OpenAIChatModel | None) -> dict[str, Any]:
    try:
        if case.scorer == "llm_judge":
            if judge is None:
                raise scorers.ScorerError("no judge profile: the LLM judge cannot score")
            score = await scorers.judge(judge, question=case.question, expected=case.expected,
                                        rubric=case.rubric, answer=answer)
        else:
            score = await scorers.ascore_answer(case.scorer, answer, case.expected,
                                                case.tolerance)
    except scorers.JudgeReplyError as exc:
        return {"status": "error", "error": str(exc), "scorer_detail": exc.detail}
    except scorers.ScorerError as exc:
        return {"status": "error", "error": str(exc),
                "scorer_detail": {"scorer": case.scorer}}
    return {"status": "done", "score": score.score, "passed": score.passed,
            "scorer_detail": {**score.detail, "answer_seen": answer[:2000]}}


def _save(result_id: int, **fields: Any) -> None:
    Result.objects.filter(pk=result_id).update(finished_at=timezone.now(), **fields)


async def _report(experiment_id: int, done: int, total: int, result_id: int | None,
                  status: str, on_progress: Progress | None) -> None:
    if on_progress is not None:
        value = on_progress(done, total)
        if inspect.isawaitable(value):
            await value
    await _send(experiment_id, {"type": "experiment.progress", "done": done, "total": total,
                                "result_id": result_id, "result_status": status})


async def _send(experiment_id: int, message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(group_name(experiment_id), message)
    except Exception:  # a broken channel layer must not lose results already saved
        log.warning("could not publish progress of experiment %s", experiment_id, exc_info=True)
