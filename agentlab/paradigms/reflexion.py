"""Reflexion (Shinn et al. 2023): attempt, evaluate, write a lesson, try again with the lessons.

Each attempt is a `message` step (role "actor") with the actor's work nested under it: a ReAct
sub-run (JSON mode) or one plain LLM answer. The evaluator scores it — an LLM asked for
"Score: N/10" and the problems, or a programmatic check:

* evaluator "contains": the answer must contain `expected` (case and spacing ignored);
* evaluator "regex": the Python regular expression `expected` must match (case ignored); it
  is at most 1,000 characters and one search at most a second (`user_regex`), run in a thread
  so the event loop stays free; a search that runs out of time leaves the attempt unscored
  (an evaluation error step), like an unreadable score.

A check scores 10 when it passes and 1 when it fails; the expected text is not shown to the
model. An attempt passes when its score reaches `threshold` (a check: when it passes). Below it,
the reflector writes a one-sentence lesson; the last `memory_size` lessons prefix the next
attempt's task. The run stops at the first attempt that passes, else returns the best-scoring
attempt (ties: the earlier), not the last. A score that cannot be read is an error step and one
retry asking for the score line only; if still unreadable, the attempt has no score (never 0 or
10) and does not pass.

LLM calls when the actor answers in one turn: 2 per attempt (actor, evaluator) + 1 lesson per
failed attempt but the last; an attempt that passes first time costs 2.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, ClassVar

from agentlab.paradigms._reflexion_parts import (
    SCORE_HIGH,
    Attempt,
    best_attempt,
    evaluation_text,
    make_check,
    read_lesson,
    read_problems,
    read_score,
)
from agentlab.paradigms.prompt_files import fill, load_prompt
from agentlab.paradigms.registry import Paradigm, register_paradigm
from agentlab.paradigms.user_regex import MAX_PATTERN_CHARS, UnsafePattern
from agentlab.runtime.limits import IterationLimit, LoopDetected
from traces.schema import Step

if TYPE_CHECKING:
    from agentlab.runtime.context import RunContext


@register_paradigm
class Reflexion(Paradigm):
    key: ClassVar[str] = "reflexion"
    label: ClassVar[str] = "Reflexion"
    description: ClassVar[str] = ("Answers, has the answer scored, and after a poor score writes "
                                  "a one-sentence lesson and tries again; returns the best try.")
    demo_question: ClassVar[str] = (
        "A bat and a ball cost 1.10 dollars in total. The bat costs 1.00 dollar more than the "
        "ball. How much does the ball cost, in cents? Check the arithmetic with the calculator.")
    params_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "max_attempts": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
            "threshold": {"type": "number", "minimum": 1, "maximum": 10, "default": 8,
                          "description": "Score (1-10) an attempt needs to pass."},
            "actor": {"enum": ["react", "direct"], "default": "react",
                      "description": "ReAct with tools (JSON mode) or one plain LLM answer."},
            "actor_max_iterations": {"type": "integer", "minimum": 1, "maximum": 20,
                                     "default": 4},
            "evaluator": {"enum": ["llm", "contains", "regex"], "default": "llm",
                          "description": "An LLM score, or a check of the answer against "
                                         "'expected'."},
            "expected": {"type": "string", "default": "",
                         "description": "Text (contains) or regular expression (regex) the "
                                        "answer must have."},
            "memory_size": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3,
                            "description": "How many of the latest lessons the actor sees."},
        },
        "allOf": [{"if": {"properties": {"evaluator": {"enum": ["contains", "regex"]}},
                          "required": ["evaluator"]},
                   "then": {"properties": {"expected": {"minLength": 1}}}},
                  {"if": {"properties": {"evaluator": {"const": "regex"}},
                          "required": ["evaluator"]},
                   "then": {"properties": {"expected": {"format": "regex",
                                                        "maxLength": MAX_PATTERN_CHARS}}}}],
        "additionalProperties": False,
    }

    async def run(self, ctx: RunContext, task: str) -> str:
        """Attempt, evaluate, reflect until an attempt passes or the attempts run out."""
        self.ctx, self.task = ctx, task
        self.params = self.params_of(ctx)
        self.check = make_check(self.params["evaluator"], self.params["expected"])
        self.attempts: list[Attempt] = []
        self.lessons: list[str] = []
        total = self.params["max_attempts"]
        for number in range(1, total + 1):
            attempt = await self._attempt(number)
            if attempt.passed:
                return await self._choose(attempt, "the first that passed")
            if number < total:
                await self._reflect(attempt)
        best = best_attempt(self.attempts)
        if best is None or not best.finished:
            raise IterationLimit(f"no attempt finished with an answer ({total} tried)")
        return await self._choose(best, f"the best of {total}")

    # ------------------------------------------------------------ actor

    async def _attempt(self, number: int) -> Attempt:
        memory = self.lessons[-self.params["memory_size"]:]
        prompt = self.task if not memory else fill(
            load_prompt("reflexion_attempt.txt"), task=self.task,
            lessons="\n".join(f"- {lesson}" for lesson in memory))
        step = await self.ctx.emit(Step(kind="message", role="actor", name=f"attempt {number}",
                                        input=prompt, status="running",
                                        meta={"attempt": number, "lessons": memory}))
        self.seq, started = step.seq, time.perf_counter()
        try:
            attempt = await self._act(number, prompt)
            self.attempts.append(attempt)
            self.problems = await self._evaluate(attempt)
        except BaseException:  # the run's own limit or a cancel: the step must not stay running
            await self.ctx.finish(step, status="error", started=started,
                                  meta={**step.meta, "interrupted": True})
            raise
        step.meta.update(score=attempt.score, passed=attempt.passed)
        await self.ctx.finish(step, status="ok" if attempt.finished else "error",
                              started=started, text=attempt.answer, output=attempt.answer)
        return attempt

    async def _act(self, number: int, prompt: str) -> Attempt:
        if self.params["actor"] == "direct":
            system = load_prompt("reflexion_actor.txt")
            if self.ctx.system_prompt:
                system = f"{self.ctx.system_prompt}\n\n{system}"
            result = await self.ctx.llm("actor", [{"role": "system", "content": system},
                                                  *self.ctx.history,
                                                  {"role": "user", "content": prompt}],
                                        parent=self.seq)
            answer = (result.text or "").strip()
            return Attempt(number, answer) if answer else Attempt(
                number, "(no answer: the reply was empty)", finished=False)
        params = {"mode": "json", "reflector": "none",
                  "max_iterations": self.params["actor_max_iterations"]}
        try:
            answer = await self.ctx.sub_run("react", prompt, role="actor", parent=self.seq,
                                            params=params)
        except (IterationLimit, LoopDetected) as exc:
            return Attempt(number, f"(not finished: {exc.reason})", finished=False)
        return Attempt(number, answer)

    # ------------------------------------------------------------ evaluator

    async def _evaluate(self, attempt: Attempt) -> str:
        """Score `attempt` (sets score and passed), emit the evaluation; returns the problems."""
        meta: dict[str, Any] = {"attempt": attempt.number, "evaluator": self.params["evaluator"],
                                "threshold": self.params["threshold"]}
        if not attempt.finished:
            problems, meta["skipped"] = attempt.answer, "the attempt did not finish"
        elif self.check is not None:
            try:  # in a thread: a regex search may take up to its time limit
                attempt.passed = await asyncio.to_thread(self.check, attempt.answer)
            except UnsafePattern as exc:  # out of time: unscored, like an unreadable score
                attempt.score, problems = None, f"the check could not be evaluated: {exc}"
                meta["check_error"] = str(exc)
            else:
                attempt.score = SCORE_HIGH if attempt.passed else 1
                problems = "" if attempt.passed else (
                    f"the answer does not pass the {self.params['evaluator']!r} check (the "
                    "expected text is not shown)")
        else:
            attempt.score, problems = await self._llm_score(attempt)
            attempt.passed = (attempt.score is not None
                              and attempt.score >= self.params["threshold"])
            meta["unreadable_score"] = attempt.score is None
        output = {"score": attempt.score, "problems": problems, "passed": attempt.passed}
        await self.ctx.emit(Step(
            kind="evaluation", role="evaluator", name=self.params["evaluator"],
            parent=self.seq, input=attempt.answer, output=output,
            text=evaluation_text(attempt, problems), meta=meta,
            status="ok" if attempt.score is not None else "error"))
        return problems

    async def _llm_score(self, attempt: Attempt) -> tuple[float | None, str]:
        request = fill(load_prompt("reflexion_evaluate_request.txt"), task=self.task,
                       answer=attempt.answer)
        messages = [{"role": "system", "content": load_prompt("reflexion_evaluator.txt")},
                    {"role": "user", "content": request}]
        result = await self.ctx.llm("evaluator", messages, parent=self.seq)
        score, error = read_score(result.text or "")
        problems = read_problems(result.text or "")
        if score is None:  # one retry asking for the score line only
            await self._score_error(result.text, error)
            messages += [{"role": "assistant", "content": result.text or ""},
                         {"role": "user", "content": fill(load_prompt(
                             "reflexion_score_only.txt"), error=error)}]
            retry = await self.ctx.llm("evaluator", messages, parent=self.seq)
            score, error = read_score(retry.text or "")
            if score is None:
                await self._score_error(retry.text, error + " The attempt stays unscored.")
        return score, problems

    async def _score_error(self, raw: str | None, error: str) -> None:
        self.ctx.totals.format_errors += 1
        await self.ctx.emit(Step(kind="error", role="evaluator", parent=self.seq, input=raw,
                                 text=f"could not read a score in the evaluator's reply: {error}",
                                 status="error", meta={"format_error": True}))

    # ------------------------------------------------------------ reflector

    async def _reflect(self, attempt: Attempt) -> None:
        request = fill(load_prompt("reflexion_reflect_request.txt"), task=self.task,
                       attempt=str(attempt.number), answer=attempt.answer,
                       evaluation=evaluation_text(attempt, self.problems),
                       lessons="\n".join(f"- {x}" for x in self.lessons) or "(none)")
        result = await self.ctx.llm("reflector", [
            {"role": "system", "content": load_prompt("reflexion_reflector.txt")},
            {"role": "user", "content": request}], parent=self.seq)
        lesson = read_lesson(result.text or "")
        if not lesson:
            self.ctx.totals.format_errors += 1
            await self.ctx.emit(Step(kind="error", role="reflector", parent=self.seq,
                                     input=result.text, status="error",
                                     text="the reflector wrote no lesson; the next attempt "
                                          "gets none from this one",
                                     meta={"format_error": True}))
            return
        self.lessons.append(lesson)
        self.ctx.totals.reflections += 1
        await self.ctx.emit(Step(kind="reflection", role="reflector",
                                 name=f"lesson {attempt.number}", parent=self.seq, text=lesson,
                                 output={"lesson": lesson, "attempt": attempt.number},
                                 meta={"attempt": attempt.number}))

    # ------------------------------------------------------------ answer

    async def _choose(self, attempt: Attempt, why: str) -> str:
        await self.ctx.emit(Step(
            kind="thought", role="reflexion", name="choice",
            text=f"Returning attempt {attempt.number} ({attempt.score_text()}), {why}",
            meta={"chosen": attempt.number, "scores": [a.score for a in self.attempts]}))
        return attempt.answer

    def partial_answer(self, ctx: RunContext, reason: str) -> str:
        """The best finished attempt so far, if any."""
        best = best_attempt([a for a in getattr(self, "attempts", []) if a.finished])
        if best is None:
            return super().partial_answer(ctx, reason)
        return (f"I stopped before finishing ({reason}). The best attempt so far (attempt "
                f"{best.number}, {best.score_text()}):\n{best.answer}")
