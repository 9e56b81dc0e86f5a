"""ReWOO's evidence gathering (package-private; the paper calls this stage the Worker, and its
steps keep the role "worker"): check a plan, map inputs to arguments, run the steps.

Choices the paradigm and its tests rely on:

* A step is not run when its tool is unknown, it refers to a variable no earlier step defines, or
  it redefines a variable (references then mean the first definition). Each is an `error` step.
* A step that depends on a failed, invalid or skipped step is skipped with "skipped: #E1 failed"
  rather than run on error text: a tool fed "(error: ...)" would only produce more noise, and the
  solver sees the original error anyway.
* Scheduling: every step starts as soon as its own dependencies are done, so independent steps
  run at the same time and dependent ones after (dependency waves without a barrier per wave).
* Two steps with the same tool and arguments run once; the second reuses the first's evidence
  (a `tool` step with meta "reused"), which also keeps a repetitive plan clear of loop detection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any

from agentlab.paradigms.parsing import PlanStep, call_args, resolve_refs
from agentlab.paradigms.prompt_files import fill, load_prompt
from traces.schema import Step, normalise_args

if TYPE_CHECKING:
    from agentlab.runtime.context import RunContext

LLM = "LLM"
Outcome = tuple[bool, str]  # (ok, evidence text)


def find_tool(name: str, names: Sequence[str]) -> str | None:
    """The tool `name` means: exact, else a unique case-insensitive match; "LLM" is the model."""
    if name.upper() == LLM:
        return LLM
    if name in names:
        return name
    matches = [n for n in names if n.casefold() == name.casefold()]
    return matches[0] if len(matches) == 1 else None


def check_plan(steps: Sequence[PlanStep], names: Sequence[str]) -> list[str | None]:
    """For each step, why it cannot run (None when it can), in the words the user sees."""
    defined: dict[str, int] = {}
    problems: list[str | None] = []
    for number, step in enumerate(steps, 1):
        missing = [ref for ref in step.depends_on if ref not in defined]
        if step.var in defined:
            problem = (f"{step.var} is defined twice (steps {defined[step.var]} and {number}); "
                       f"step {number} was not run")
        elif missing:
            problem = (f"{step.var} refers to {', '.join(missing)}, which no earlier step "
                       "defines; it was not run")
        elif find_tool(step.tool, names) is None:
            problem = (f"{step.var} uses the unknown tool {step.tool!r}; available tools: "
                       f"{', '.join([*names, LLM])}")
        else:
            problem = None
        defined.setdefault(step.var, number)
        problems.append(problem)
    return problems


def tool_arguments(parameters: dict[str, Any], text: str) -> dict[str, Any]:
    """A step's input text as the tool's arguments.

    A JSON object (or ``key="value"`` literals) naming only the tool's parameters is passed as
    is; otherwise the text is the single required string parameter, else the first parameter.
    """
    props: dict[str, Any] = parameters.get("properties", {})
    required = parameters.get("required", [])
    given = call_args(text)
    if isinstance(given, dict) and given and set(given) <= set(props):
        return given
    if not text.strip() or not props:
        return {}
    strings = [k for k in required if props.get(k, {}).get("type") == "string"]
    if len(required) == 1 and strings:
        return {strings[0]: text}
    return {next(iter(props)): text}


async def gather_or_cancel(*aws: Awaitable[Any]) -> list[Any]:
    """asyncio.gather, but when one fails (budget, cancel) the others are cancelled too."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        raise


class EvidenceGatherer:
    """Runs one plan under the plan step `parent`; `results` holds each step's evidence."""

    def __init__(self, ctx: RunContext, parent: int) -> None:
        self.ctx, self.parent = ctx, parent
        self.results: dict[int, str] = {}  # step index -> evidence text, as it arrives
        self._calls: dict[str, tuple[str, asyncio.Future[Outcome]]] = {}

    async def run(self, steps: Sequence[PlanStep], problems: Sequence[str | None]) -> list[str]:
        loop = asyncio.get_running_loop()
        done: dict[str, asyncio.Future[Outcome]] = {}
        runnable = []
        for index, (step, problem) in enumerate(zip(steps, problems, strict=True)):
            if problem is None:
                done[step.var] = loop.create_future()
                runnable.append(index)
                continue
            self.results[index] = await self._error(step, problem)
            if step.var not in done:  # a duplicate keeps the first definition's outcome
                done[step.var] = loop.create_future()
                done[step.var].set_result((False, self.results[index]))
        await gather_or_cancel(*(self._step(i, steps[i], done) for i in runnable))
        return [self.results[i] for i in range(len(steps))]

    async def _step(self, index: int, step: PlanStep,
                    done: dict[str, asyncio.Future[Outcome]]) -> None:
        outcomes = [await done[ref] for ref in step.depends_on]
        failed = [ref for ref, (ok, _) in zip(step.depends_on, outcomes, strict=True) if not ok]
        if failed:
            outcome: Outcome = (False, await self._error(step, f"skipped: {', '.join(failed)} "
                                                               "failed"))
        else:
            evidence = {ref: text for ref, (_, text) in zip(step.depends_on, outcomes,
                                                            strict=True)}
            outcome = await self._call(step, resolve_refs(step.tool_input, evidence))
        self.results[index] = outcome[1]
        done[step.var].set_result(outcome)

    async def _call(self, step: PlanStep, text: str) -> Outcome:
        name = find_tool(step.tool, self.ctx.executor.names)
        assert name is not None  # check_plan let only known tools through
        if name == LLM:
            prompt = fill(load_prompt("rewoo_llm.txt"), input=text)
            result = await self.ctx.llm("worker", [{"role": "user", "content": prompt}],
                                        parent=self.parent)
            answer = (result.text or "").strip()
            return (True, answer) if answer else (False, "(error: the LLM step answered nothing)")
        spec = self.ctx.executor.spec(name)
        args = tool_arguments(spec.parameters if spec else {}, text)
        key = f"{name} {normalise_args(args)}"
        if key in self._calls:
            return await self._reuse(step, name, args, *self._calls[key])
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._calls[key] = (step.var, future)
        try:
            result = await self.ctx.tool(name, args, parent=self.parent, role="worker",
                                         meta={"var": step.var})
        except BaseException:
            future.cancel()  # a step waiting to reuse this call is cancelled with the run
            raise
        outcome = ((True, result.observation) if result.ok else
                   (False, f"(error: {result.observation.removeprefix('Error: ')})"))
        future.set_result(outcome)
        return outcome

    async def _reuse(self, step: PlanStep, name: str, args: dict[str, Any], first: str,
                     future: asyncio.Future[Outcome]) -> Outcome:
        ok, text = await future
        await self.ctx.emit(Step(kind="tool", role="worker", name=name, parent=self.parent,
                                 input=args, text=text, status="ok" if ok else "error",
                                 duration_ms=0.0, meta={"reused": first, "var": step.var}))
        return ok, text

    async def _error(self, step: PlanStep, problem: str) -> str:
        await self.ctx.emit(Step(kind="error", role="worker", name=step.var, parent=self.parent,
                                 input={"tool": step.tool, "tool_input": step.tool_input},
                                 text=problem, status="error", meta={"var": step.var}))
        return f"(error: {problem})"
