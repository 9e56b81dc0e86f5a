"""Plan-and-Execute: a planner writes the steps, a ReAct executor does each, a replanner revises.

After Wang et al. 2023, "Plan-and-Solve Prompting" (make a plan first, then carry it out) and
LangChain's plan-and-execute agent (planner → one executor run per step → a replanner that
returns the remaining steps or the answer).

LLM calls on a task whose executor finishes each step in one ReAct turn: 1 (planner) + one per
step + one replanner call per step while revisions are allowed, + 1 solver unless the replanner
answered. A plan of 3 steps with replan=false costs 5 calls; a plan of one step that the
executor answered needs no solver (its answer is the run's): 2 calls.

Guards: a plan that cannot be read gets one retry, then the run fails; more than 7 steps are cut
to 7; steps the replanner re-emits after they were done are dropped; after `max_revisions`
accepted revisions the replanner is no longer asked and the plan runs as it stands.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, ClassVar

from agentlab.paradigms._plan_execute_parts import (
    MAX_PLAN_STEPS,
    PLAN_FORMAT,
    REPLAN_FORMAT,
    Replan,
    drop_repeats,
    normalise,
    numbered,
    parse_replan,
    results_text,
)
from agentlab.paradigms.parsing import ParseError, parse_numbered_plan
from agentlab.paradigms.prompt_files import example_turns, few_shot_schema, fill, load_prompt
from agentlab.paradigms.registry import Paradigm, register_paradigm
from agentlab.runtime.limits import IterationLimit, LoopDetected
from traces.schema import Step

if TYPE_CHECKING:
    from agentlab.runtime.context import RunContext


class PlanFailed(Exception):
    """The planner gave no usable plan, even after being told what was wrong."""


@register_paradigm
class PlanExecute(Paradigm):
    key: ClassVar[str] = "plan_execute"
    label: ClassVar[str] = "Plan-and-Execute"
    description: ClassVar[str] = ("A planner writes up to 7 steps, a ReAct executor carries out "
                                  "each one, and a replanner revises the rest or gives the "
                                  "answer.")
    demo_question: ClassVar[str] = (
        "Look up the current weather in Paris and in Berlin, then use the calculator to work out "
        "how many degrees Celsius warmer the warmer of the two cities is.")
    params_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "structured_plan": {"type": "boolean", "default": True,
                                "description": "Ask planner and replanner for JSON through "
                                               "structured output (text is still parsed)."},
            "executor_mode": {"enum": ["function_calling", "text", "json"], "default": "json",
                              "description": "ReAct mode of the executor."},
            "executor_max_iterations": {"type": "integer", "minimum": 1, "maximum": 20,
                                        "default": 4},
            "replan": {"type": "boolean", "default": True,
                       "description": "Ask the replanner after each step."},
            "max_revisions": {"type": "integer", "minimum": 0, "maximum": 10, "default": 3,
                              "description": "Accepted plan revisions before the replanner "
                                             "is no longer asked."},
            "few_shot": few_shot_schema(
                "Example turns shown to the planner before the task: a task, then its plan "
                "(a small model otherwise copies the prompt's own wording as its plan)."),
            "executor_first_tool_choice": {
                "enum": ["auto", "required"], "default": "auto",
                "description": "'required': the executor's first reply in each step must call "
                               "a tool (a small model otherwise answers the step from "
                               "memory)."},
            "executor_few_shot": few_shot_schema(
                "Example turns shown to the executor before each step, in its ReAct mode's "
                "format."),
        },
        "additionalProperties": False,
    }

    async def run(self, ctx: RunContext, task: str) -> str:
        """Plan, execute each step (replanning after each), then answer."""
        self.ctx, self.task = ctx, task
        self.params = self.params_of(ctx)
        self.results: list[tuple[str, str]] = []  # (step, result) of each executed step
        self.finished_steps = 0  # of those, the ones the executor answered
        steps, meta = _capped(await self._make_plan())
        plan = await self._emit_plan(steps, revision=0, role="planner", meta=meta)
        remaining, revisions = steps, 0
        while remaining:
            current, remaining = remaining[0], remaining[1:]
            await self._execute(current, plan.seq)
            if not self.params["replan"] or revisions >= self.params["max_revisions"]:
                continue
            decision = await self._replan(remaining)
            if decision is None:
                continue
            if decision.finish:
                return decision.answer
            revised = await self._revise(remaining, decision, revisions + 1)
            if revised is not None:
                revisions += 1
                remaining, plan = revised
        return await self._solve()

    # ------------------------------------------------------------ planner

    async def _make_plan(self) -> list[str]:
        messages = [{"role": "system", "content": self._system("plan_execute_planner.txt")},
                    *example_turns(self.params["few_shot"]), *self.ctx.history,
                    {"role": "user", "content": self.task}]
        error = ""
        for _ in range(2):  # one retry, told what was wrong
            result = await self.ctx.llm("planner", messages,
                                        response_format=self._format(PLAN_FORMAT))
            try:
                return parse_numbered_plan(result.text or "")
            except ParseError as exc:
                error = str(exc)
                await self._format_error("planner", f"the plan could not be read: {error}",
                                         raw=result.text)
                messages = [*messages, {"role": "assistant", "content": result.text or ""},
                            {"role": "user", "content": f"Error: {error}"}]
        raise PlanFailed(f"the planner gave no usable plan in 2 tries: {error}")

    async def _emit_plan(self, steps: list[str], *, revision: int, role: str,
                         meta: dict[str, Any]) -> Step:
        return await self.ctx.emit(Step(
            kind="plan", role=role, name="plan" if revision == 0 else f"revision {revision}",
            output=list(steps), text=numbered(steps, len(self.results) + 1),
            meta={"revision": revision, "done": len(self.results), **meta}))

    # ------------------------------------------------------------ executor

    async def _execute(self, current: str, plan_seq: int) -> None:
        n = len(self.results) + 1
        item = await self.ctx.emit(Step(kind="plan", role="executor", name=f"step {n}",
                                        parent=plan_seq, text=current, input=current,
                                        status="running", meta={"step": n}))
        started = time.perf_counter()
        # The step as the executor's question, as its examples ask one; what earlier steps
        # found follows it. (With the task and the whole plan around it, the 135M executor
        # called its tool again and again instead of answering.)
        step_task = current if not self.results else fill(
            load_prompt("plan_execute_step.txt"), task=self.task,
            results=results_text(self.results), step=current)
        params = {"mode": self.params["executor_mode"], "reflector": "none",
                  "max_iterations": self.params["executor_max_iterations"],
                  "few_shot": self.params["executor_few_shot"],
                  "first_tool_choice": self.params["executor_first_tool_choice"]}
        status, found_before = "ok", len(self.ctx.findings)
        try:
            # The step task carries the context the executor needs; no chat history.
            result = await self.ctx.sub_run("react", step_task, role="executor",
                                            parent=item.seq, params=params, history=[])
        except (IterationLimit, LoopDetected) as exc:
            # What the step's tools found is still its result: a small model often looks a
            # city up and then calls the tool again instead of answering.
            found = self.ctx.findings[found_before:]
            result, status = (f"{found[-1]} (the step stopped: {exc.reason})" if found
                              else f"(not finished: {exc.reason})"), "error"
        except BaseException:  # the run's own limit or a cancel: the step must not stay running
            await self.ctx.finish(item, status="error", started=started, output="(interrupted)",
                                  meta={**item.meta, "interrupted": True})
            raise
        self.results.append((current, result))
        self.finished_steps += status == "ok"
        await self.ctx.finish(item, status=status, started=started, output=result)

    # ------------------------------------------------------------ replanner

    async def _replan(self, remaining: list[str]) -> Replan | None:
        request = fill(load_prompt("plan_execute_replan_request.txt"), task=self.task,
                       results=results_text(self.results), remaining=numbered(remaining))
        messages = [{"role": "system", "content": self._system("plan_execute_replanner.txt")},
                    {"role": "user", "content": request}]
        result = await self.ctx.llm("replanner", messages,
                                    response_format=self._format(REPLAN_FORMAT))
        try:
            return parse_replan(result.text or "")
        except ParseError as exc:
            await self._format_error("replanner", "the replanner's reply could not be read; "
                                     f"the plan stays as it is: {exc}", raw=result.text)
            return None

    async def _revise(self, remaining: list[str], decision: Replan,
                      revision: int) -> tuple[list[str], Step] | None:
        """Accept the replanner's steps as revision `revision`; None when nothing changed."""
        kept, dropped = drop_repeats(decision.steps, [s for s, _ in self.results])
        if not dropped and [normalise(s) for s in kept] == [normalise(s) for s in remaining]:
            return None  # the same plan again is not a revision
        meta: dict[str, Any] = {}
        if dropped:
            meta["dropped_repeats"] = dropped
            if not kept:  # it only repeated finished steps: nothing new to go on
                kept, meta["kept_current_plan"] = remaining, True
        kept, cut = _capped(kept)
        plan = await self._emit_plan(kept, revision=revision, role="replanner",
                                     meta={**meta, **cut})
        return kept, plan

    # ------------------------------------------------------------ solver

    async def _solve(self) -> str:
        if len(self.results) == 1 and self.finished_steps == 1:
            # A plan of one step that the executor answered: its answer is the run's (a
            # solver call would only restate it, and a small model restates it worse).
            return self.results[0][1]
        request = fill(load_prompt("plan_execute_solve_request.txt"), task=self.task,
                       results=results_text(self.results))
        messages = [{"role": "system", "content": self._system("plan_execute_solver.txt")},
                    *self.ctx.history, {"role": "user", "content": request}]
        result = await self.ctx.llm("solver", messages)
        answer = (result.text or "").strip()
        if answer:
            return answer
        await self._format_error("solver", "the solver's reply was empty; answering with the "
                                 "step results", raw=result.text)
        return "Results of the steps:\n" + results_text(self.results)

    # ------------------------------------------------------------ shared

    def _system(self, name: str) -> str:
        prompt = fill(load_prompt(name), tools=self.ctx.executor.describe())
        return f"{self.ctx.system_prompt}\n\n{prompt}" if self.ctx.system_prompt else prompt

    def _format(self, schema: dict[str, Any]) -> dict[str, Any] | None:
        return schema if self.params["structured_plan"] else None

    async def _format_error(self, role: str, message: str, *, raw: str | None) -> None:
        self.ctx.totals.format_errors += 1
        await self.ctx.emit(Step(kind="error", role=role, text=message, input=raw,
                                 status="error", meta={"format_error": True}))

    def partial_answer(self, ctx: RunContext, reason: str) -> str:
        """The results of the steps done so far."""
        results = getattr(self, "results", [])
        if not results:
            return super().partial_answer(ctx, reason)
        return (f"I stopped before finishing ({reason}). Results of the steps so far:\n"
                + results_text(results))


def _capped(steps: list[str]) -> tuple[list[str], dict[str, Any]]:
    """At most MAX_PLAN_STEPS steps; the meta names what was cut."""
    if len(steps) <= MAX_PLAN_STEPS:
        return steps, {}
    return steps[:MAX_PLAN_STEPS], {"truncated": steps[MAX_PLAN_STEPS:],
                                    "note": f"kept the first {MAX_PLAN_STEPS} of {len(steps)} "
                                            "steps"}
