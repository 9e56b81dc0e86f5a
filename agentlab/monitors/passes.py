"""The periodic pass: each enabled live scorer finds the watched runs that finished since its
watermark, claims the sampled ones, scores them, writes each result as the scorer's feedback
on the run, moves its watermark, and checks its alert.

Found by a pass over the database rather than told by the code that ends a run, so runs of
every source count — Agent Lab's own (in this process or on a worker), imported files, traces
received over OTLP — and nothing is lost when a process stops between two passes: the
watermark (every watched run with an id up to it is settled) and the claims are rows.

A claim is a `LiveScore` row (unique per scorer and run), so several processes may pass at
once: each run is scored once. A claim whose process stopped is taken back after the
scorer's timeout and a minute.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from agentlab.feedback import record
from agentlab.feedback.models import RUN, FeedbackKey
from agentlab.feedback.values import FeedbackError, Value
from agentlab.llm.types import ProfileConfig
from agentlab.monitors import alerts, budget, rules, scoring
from agentlab.monitors.models import LiveScore, LiveScorer
from agentlab.profiles import model_for, to_config
from traces.models import Run
from traces.schema import ACTIVE_STATUSES, ANSWERED_STATUSES

log = logging.getLogger(__name__)

SCAN = 2_000  # watched runs read after the watermark, a scorer and a pass
PER_PASS = 50  # runs a scorer claims in one pass (the rest wait for the next)
AT_ONCE = 4  # scores in flight at once in one process
STALE_AFTER_S = 60  # past its timeout, a claim whose process stopped is taken back


@dataclass
class Plan:
    """One scorer's pass: the runs to score, those settled without scoring, the watermark."""

    claimed: list[tuple[LiveScore, scoring.Job]] = field(default_factory=list)
    watermark: int = 0
    counts: Counter[str] = field(default_factory=Counter)


def run_once(loop: asyncio.AbstractEventLoop | None = None, now: datetime | None = None
             ) -> Counter[str]:
    """One pass of every enabled scorer; what happened, counted ("done", "error", …). Call it
    off any event loop (it blocks); `loop` runs the scores (a new one if not given)."""
    counts: Counter[str] = Counter()
    for scorer in LiveScorer.objects.filter(enabled=True).select_related("judge_profile"):
        try:
            counts += pass_scorer(scorer, loop, now or timezone.now())
        except Exception:  # one scorer's trouble (its profile gone…) stops not the others
            log.exception("live scorer %s: the pass failed", scorer.pk)
            counts["failed passes"] += 1
    return counts


def pass_scorer(scorer: LiveScorer, loop: asyncio.AbstractEventLoop | None, now: datetime
                ) -> Counter[str]:
    if scorer.paused_until and scorer.paused_until <= now:
        LiveScorer.objects.filter(pk=scorer.pk).update(paused_until=None, paused_reason="")
        scorer.paused_until, scorer.paused_reason = None, ""
    stale = now - timedelta(seconds=scorer.timeout_s + STALE_AFTER_S)
    LiveScore.objects.filter(scorer=scorer, status="running", claimed_at__lt=stale).delete()
    judge = _judge_profile(scorer)
    plan = _plan(scorer, judge, now)
    if plan.claimed:
        outcomes = _run(loop, _score_all([job for _row, job in plan.claimed], judge))
        key = _feedback_key(scorer)
        for (row, _job), outcome in zip(plan.claimed, outcomes, strict=True):
            plan.counts[_settle(scorer, key, row, outcome)] += 1
    LiveScorer.objects.filter(pk=scorer.pk, watermark__lt=plan.watermark).update(
        watermark=plan.watermark)
    if change := alerts.evaluate(scorer, timezone.now()):
        plan.counts[f"alert {change}"] += 1
    return plan.counts


def _plan(scorer: LiveScorer, judge: ProfileConfig | None, now: datetime) -> Plan:
    """Walk the watched runs after the watermark in id order: claim the sampled finished runs
    not yet claimed (PER_PASS at most); the watermark moves over every run settled in a row
    and stops at the first that is not (still going, or left for the next pass)."""
    plan = Plan(watermark=scorer.watermark or 0)
    runs = list(scorer.watched().filter(pk__gt=plan.watermark).order_by("pk").values(
        "pk", "status")[:SCAN])
    sampled = [r["pk"] for r in runs if r["status"] not in ACTIVE_STATUSES
               and rules.sampled(scorer.pk, r["pk"], scorer.sample_rate)]
    have = dict(LiveScore.objects.filter(scorer=scorer, run_id__in=sampled).values_list(
        "run_id", "status")) if sampled else {}
    wanted = [pk for pk in sampled if pk not in have][:PER_PASS]
    claimed = _claim(scorer, wanted, judge, now, plan) if wanted else set()
    blocked = False
    for r in runs:
        pk = r["pk"]
        settled = r["status"] not in ACTIVE_STATUSES and (
            pk not in sampled or pk in claimed or have.get(pk, "running") != "running")
        if not settled:
            blocked = True
        if not blocked:
            plan.watermark = pk
    return plan


def _claim(scorer: LiveScorer, run_ids: list[int], judge: ProfileConfig | None,
           now: datetime, plan: Plan) -> set[int]:
    """Claim these runs for the scorer, its row locked so budget checks take turns; once the
    budget is spent the rest are skipped and the scorer pauses. The ids settled here."""
    runs = Run.objects.in_bulk(run_ids)
    done: set[int] = set()
    with transaction.atomic():
        LiveScorer.objects.select_for_update().filter(pk=scorer.pk).first()
        for pk in run_ids:
            run = runs.get(pk)
            if run is None:
                continue
            fields: dict[str, Any] = {"run_status": run.status, "run_cost_usd": run.cost_usd,
                                      "run_wall_ms": run.wall_ms, "claimed_at": now}
            job = None
            if run.status not in ANSWERED_STATUSES:
                fields |= {"status": "unanswered", "finished_at": now}
            elif scorer.paused:
                fields |= {"status": "skipped", "finished_at": now,
                           "error": scorer.paused_reason}
            else:
                job = _job(scorer, run)
                if judge is not None:
                    most = scoring.most_it_costs(job, judge)
                    if why := budget.refusal(scorer, most, now):
                        budget.pause(scorer, why, now)
                        job, fields = None, fields | {"status": "skipped", "finished_at": now,
                                                      "error": scorer.paused_reason}
                    else:
                        fields |= {"cost_usd": most, "calls": 1}  # reserved until it answers
            try:
                with transaction.atomic():
                    row = LiveScore.objects.create(scorer=scorer, run=run, **fields)
            except IntegrityError:  # another process claimed it first
                continue
            done.add(pk)
            if job is None:
                plan.counts[row.status] += 1
            else:
                plan.claimed.append((row, dataclasses.replace(job, score_id=row.pk)))
    return done


def _job(scorer: LiveScorer, run: Run) -> scoring.Job:
    return scoring.Job(0, scorer.kind, scoring.clip(run.input), scoring.clip(run.final_answer),
                       scorer.expected, scorer.tolerance, scorer.rubric, scorer.timeout_s)


def _judge_profile(scorer: LiveScorer) -> ProfileConfig | None:
    if scorer.kind != "llm_judge" or scorer.judge_profile is None:
        return None
    return scoring.judge_config(to_config(scorer.judge_profile), max_tokens=scorer.max_tokens,
                                timeout_s=scorer.timeout_s)


async def _score_all(jobs: list[scoring.Job], judge: ProfileConfig | None
                     ) -> list[scoring.Outcome]:
    model = model_for(judge) if judge is not None else None
    gate = asyncio.Semaphore(AT_ONCE)

    async def one(job: scoring.Job) -> scoring.Outcome:
        async with gate:
            return await scoring.score(job, model)

    return await asyncio.gather(*(one(job) for job in jobs))


def _run(loop: asyncio.AbstractEventLoop | None, coro: Any) -> Any:
    if loop is None:
        return asyncio.run(coro)
    return loop.run_until_complete(coro)


def _feedback_key(scorer: LiveScorer) -> FeedbackKey:
    key, _ = FeedbackKey.objects.get_or_create(name=scorer.key, defaults={
        "kind": "numeric", "minimum": 0, "maximum": 1,
        "description": f"Written by the live scorer {scorer.name} (0–1)."[:1000]})
    return key


def _settle(scorer: LiveScorer, key: FeedbackKey, row: LiveScore,
            outcome: scoring.Outcome) -> str:
    """Save the outcome; a score becomes the scorer's feedback on the run."""
    fields: dict[str, Any] = {
        "status": outcome.status, "score": outcome.score, "passed": outcome.passed,
        "error": outcome.error[:2000], "detail": _small(outcome.detail),
        "duration_ms": outcome.duration_ms, "finished_at": timezone.now()}
    if outcome.cost_usd is not None:
        fields["cost_usd"] = float(outcome.cost_usd)
    if outcome.status == "done":
        try:
            record.give(row.run, RUN, scorer=scorer.name, name=key.name, key=key,
                        value=_value(key, outcome), note=_note(outcome))
        except (FeedbackError, Run.DoesNotExist) as exc:
            fields |= {"status": "error", "error": f"the feedback was refused: {exc}"}
    LiveScore.objects.filter(pk=row.pk).update(**fields)
    return fields["status"]


def _value(key: FeedbackKey, outcome: scoring.Outcome) -> Value:
    if key.kind == "boolean":
        return Value(1.0 if outcome.passed else 0.0, "true" if outcome.passed else "false")
    return Value(outcome.score, "pass" if outcome.passed else "fail")


def _note(outcome: scoring.Outcome) -> str:
    detail = outcome.detail
    text = str(detail.get("reasoning") or detail.get("reason") or "")
    return text[:1000]


def _small(detail: dict[str, Any]) -> dict[str, Any]:
    """What is kept of a scorer's detail: short values only (a judge's whole reply clipped)."""
    return {k: (v[:2000] if isinstance(v, str) else v) for k, v in detail.items()
            if isinstance(v, str | int | float | bool) or v is None}
