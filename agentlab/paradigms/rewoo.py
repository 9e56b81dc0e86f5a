"""ReWOO (Xu et al. 2023, "ReWOO: Decoupling Reasoning from Observations for Efficient Augmented
Language Models"): a planner writes every tool call up front (`#E1 = Tool[input]`), a worker runs
them without the LLM (independent ones at the same time), and a solver answers once from the plan
and the evidence — 2 LLM calls whatever the number of tools, plus one per `LLM[...]` step.

A plan of one step whose evidence is a plain value (a number, a name) needs no solver: 1 call.
A bad plan is never re-planned: unknown tools, undefined or duplicate variables and a reply with
no steps become `error` steps, and their errors are the evidence the solver sees.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from agentlab.llm.grammars import REWOO_PLAN
from agentlab.paradigms._rewoo_evidence import LLM, EvidenceGatherer, check_plan
from agentlab.paradigms.parsing import REWOO_FORMAT, ParseError, PlanStep, parse_rewoo_plan
from agentlab.paradigms.prompt_files import (
    example_turns,
    few_shot_schema,
    fill,
    load_prompt,
    similar_last,
)
from agentlab.paradigms.registry import Paradigm, register_paradigm
from traces.schema import Step

if TYPE_CHECKING:
    from agentlab.runtime.context import RunContext

PLAIN_CHARS = 120  # evidence up to this long, on one line, is an answer in itself


@register_paradigm
class ReWOO(Paradigm):
    key: ClassVar[str] = "rewoo"
    label: ClassVar[str] = "ReWOO"
    description: ClassVar[str] = (
        "Plans every tool call in one LLM call, runs the independent ones in parallel, then "
        "answers in one more call: cheap and fast when the lookups are known in advance.")
    demo_question: ClassVar[str] = (
        "Which city is better for an outdoor run today, Paris or Delhi? Compare their current "
        "weather and air quality.")
    params_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "max_plan_steps": {"type": "integer", "minimum": 1, "maximum": 20, "default": 8,
                               "description": "Steps after this many are reported, not run."},
            "few_shot": few_shot_schema(
                "Example turns shown to the planner before the task: a task, then its plan "
                "(a small model otherwise copies the prompt's one example, whatever the task)."),
            "few_shot_order": {
                "enum": ["given", "similar_last"], "default": "given",
                "description": "similar_last: the planner's example most like the task comes "
                               "last, where a small model imitates it (examples of many kinds "
                               "of task then serve one agent); the examples must be "
                               "user/assistant pairs, else they keep their order."},
            "few_shot_keep": {
                "type": "integer", "minimum": 0, "maximum": 12, "default": 0,
                "description": "With similar_last: show only this many examples, the ones most "
                               "like the task (0: all)."},
            "solver_few_shot": few_shot_schema(
                "Example turns shown to the solver before the task: a plan with its evidence, "
                "then the answer (a small model otherwise describes the plan instead)."),
        },
        "additionalProperties": False,
    }

    async def run(self, ctx: RunContext, task: str) -> str:
        """Plan once, run the plan's tools, solve once."""
        params = self.params_of(ctx)
        self.steps: list[PlanStep] = []
        self.gatherer: EvidenceGatherer | None = None
        # The plan's shape as a grammar for the embedded model (other servers: plain text).
        plan_format = {"type": REWOO_PLAN, "tools": [*ctx.executor.names, LLM],
                       "max_steps": params["max_plan_steps"]}
        examples = (similar_last(params["few_shot"], task, params["few_shot_keep"])
                    if params["few_shot_order"] == "similar_last" else params["few_shot"])
        reply = await ctx.llm("planner", self._planner_messages(ctx, task, examples),
                              response_format=plan_format)
        raw = reply.text or ""
        try:
            steps = parse_rewoo_plan(raw)
        except ParseError as exc:
            ctx.totals.format_errors += 1
            plan = await ctx.emit(Step(kind="plan", role="planner", name="plan", input=raw,
                                       output=[], text=raw, status="error"))
            await ctx.emit(Step(kind="error", role="worker", name="plan", parent=plan.seq,
                                text=f"no plan step could be read: {exc}", status="error",
                                meta={"format_error": True}))
            plan_evidence = f"(error: the planner wrote no readable plan: {exc})"
            return await self._solve(ctx, task, plan_evidence, params["solver_few_shot"])
        self.steps = steps
        plan = await ctx.emit(Step(kind="plan", role="planner", name="plan", input=raw,
                                   output=[_as_dict(s) for s in steps],
                                   text="\n".join(_line(s) for s in steps)))
        problems = check_plan(steps, ctx.executor.names)
        limit = params["max_plan_steps"]
        for index in range(limit, len(steps)):
            problems[index] = problems[index] or (
                f"{steps[index].var} was not run: the plan has more than {limit} steps")
        self.gatherer = EvidenceGatherer(ctx, plan.seq)
        evidence = await self.gatherer.run(steps, problems)
        if len(steps) == 1 and _plain(evidence[0]):
            # One step whose evidence is a plain value ("391", "Cairo") answers the task: a
            # solver would only restate it, and the 135M one restates it worse ("17 * 23 = 409").
            return evidence[0]
        plan_evidence = "\n\n".join(f"{_line(s)}\nEvidence: {e}"
                                    for s, e in zip(steps, evidence, strict=True))
        return await self._solve(ctx, task, plan_evidence, params["solver_few_shot"])

    def _planner_messages(self, ctx: RunContext, task: str,
                          few_shot: list[dict[str, Any]]) -> list[dict[str, Any]]:
        prompt = fill(load_prompt("rewoo_planner.txt"), tools=ctx.executor.describe() or "(none)",
                      format=REWOO_FORMAT)
        if ctx.system_prompt:
            prompt = f"{ctx.system_prompt}\n\n{prompt}"
        return [{"role": "system", "content": prompt},
                *example_turns(few_shot), *ctx.history,
                {"role": "user", "content": f"Task: {task}"}]

    async def _solve(self, ctx: RunContext, task: str, plan_evidence: str,
                     examples: list[dict[str, Any]]) -> str:
        prompt = fill(load_prompt("rewoo_solver.txt"), plan_evidence=plan_evidence, task=task)
        messages = [{"role": "system", "content": ctx.system_prompt}] if ctx.system_prompt else []
        reply = await ctx.llm("solver", [*messages, *example_turns(examples),
                                         {"role": "user", "content": prompt}])
        answer = (reply.text or "").strip()
        if answer:
            return answer
        # An empty answer would look like success; say what happened and keep the evidence.
        ctx.totals.format_errors += 1
        await ctx.emit(Step(kind="error", role="solver", text="the solver's reply was empty",
                            status="error", meta={"format_error": True}))
        return self.partial_answer(ctx, "the solver's reply was empty")

    def partial_answer(self, ctx: RunContext, reason: str) -> str:
        """The evidence collected so far, step by step."""
        gatherer, steps = getattr(self, "gatherer", None), getattr(self, "steps", [])
        if gatherer is None or not gatherer.results:
            return super().partial_answer(ctx, reason)
        lines = "\n".join(f"- {_call(steps[i])}: {_clip(text)}"
                          for i, text in sorted(gatherer.results.items()))
        return f"I stopped before answering ({reason}). Evidence so far:\n{lines}"


def _as_dict(step: PlanStep) -> dict[str, Any]:
    return {"var": step.var, "plan": step.plan, "tool": step.tool,
            "tool_input": step.tool_input, "depends_on": list(step.depends_on)}


def _call(step: PlanStep) -> str:
    return f"{step.var} = {step.tool}[{step.tool_input}]"


def _line(step: PlanStep) -> str:
    return f"Plan: {step.plan}\n{_call(step)}" if step.plan else _call(step)


def _plain(evidence: str) -> bool:
    """A short one-line value: not JSON, not an error, not a paragraph."""
    text = evidence.strip()
    return (0 < len(text) <= PLAIN_CHARS and "\n" not in text
            and not text.startswith(("{", "[", "(error")))


def _clip(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
