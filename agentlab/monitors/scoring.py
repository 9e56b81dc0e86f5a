"""One claimed run scored: the suite scorer of agentlab/evals/scorers.py on the run's question
and answer, within the live scorer's time, and for the LLM judge its profile alone (no
fallback, no retries: one score is one request, which the budget counts), its reply capped at
the scorer's max tokens. Async: it runs on the background thread's own event loop
(agentlab/monitors/background.py), never the web server's."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

from agentlab.evals import scorers
from agentlab.llm.errors import LLMError
from agentlab.llm.types import ChatModel, ProfileConfig
from agentlab.monitors import rules

MAX_TEXT_CHARS = 20_000  # of a question or an answer handed to a scorer (the judge's prompt)


@dataclass(frozen=True)
class Job:
    """What a score needs, read from the database before it starts."""

    score_id: int
    kind: str
    question: str
    answer: str
    expected: str = ""
    tolerance: float | None = None
    rubric: str = ""
    timeout_s: float = 30.0


@dataclass
class Outcome:
    status: str  # "done" or "error"
    score: float | None = None
    passed: bool | None = None
    error: str = ""
    detail: dict[str, Any] = field(default_factory=dict)
    duration_ms: float = 0.0
    cost_usd: float | None = None  # None: unknown (a judge cut off): its reservation stands


def clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT_CHARS else text[:MAX_TEXT_CHARS] + "…"


def judge_config(profile: ProfileConfig, *, max_tokens: int, timeout_s: float) -> ProfileConfig:
    """The judge's profile as a live scorer sends it: this endpoint only, one request, a reply
    of at most `max_tokens`, no longer than the scorer's timeout."""
    return dataclasses.replace(
        profile, fallback=None, retries=0, timeout_s=min(profile.timeout_s, timeout_s),
        max_tokens=min(filter(None, (profile.max_tokens, max_tokens))))


def prompt_chars(job: Job) -> int:
    return sum(len(m["content"]) for m in scorers.judge_messages(
        job.question, job.expected, job.rubric, job.answer))


def most_it_costs(job: Job, profile: ProfileConfig) -> float:
    return rules.most_a_call_costs(prompt_chars(job), profile.max_tokens or 0,
                                   profile.price_in_per_m, profile.price_out_per_m)


async def score(job: Job, judge: ChatModel | None = None) -> Outcome:
    """The job's outcome; never raises for a scorer's failure (it is an error outcome)."""
    started = time.perf_counter()
    outcome = await _score(job, judge)
    outcome.duration_ms = (time.perf_counter() - started) * 1000
    return outcome


async def _score(job: Job, judge: ChatModel | None) -> Outcome:
    try:
        async with asyncio.timeout(job.timeout_s):
            if job.kind == "llm_judge":
                if judge is None:
                    raise scorers.ScorerError("no judge profile: the LLM judge cannot score")
                result = await scorers.judge(judge, question=job.question,
                                             expected=job.expected, rubric=job.rubric,
                                             answer=job.answer)
            else:  # in a thread: a regex stops itself within 1 s, the rest are linear
                result = await scorers.ascore_answer(job.kind, job.answer, job.expected,
                                                     job.tolerance)
    except TimeoutError:
        return Outcome("error", error=f"took longer than {job.timeout_s:g} s (the scorer's "
                       "timeout) and was stopped")
    except scorers.JudgeReplyError as exc:
        return Outcome("error", error=str(exc), detail=exc.detail,
                       cost_usd=exc.detail.get("cost_usd"))
    except scorers.ScorerError as exc:
        return Outcome("error", error=str(exc), cost_usd=0.0)
    except LLMError as exc:  # the endpoint refused or failed: nothing was charged
        return Outcome("error", error=f"the judge's model failed: {exc}", cost_usd=0.0)
    cost = result.detail.get("cost_usd") if job.kind == "llm_judge" else 0.0
    return Outcome("done", score=result.score, passed=result.passed, detail=result.detail,
                   cost_usd=cost)
