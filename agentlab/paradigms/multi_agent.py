"""Multi-Agent: several agents on one task — debate (Du et al. 2023, "Improving Factuality and
Reasoning through Multiagent Debate"), a fixed pipeline of roles, or a supervisor that routes
work to workers (the LangGraph supervisor pattern).

Members are configured agents (ctx.agents) or inline roles. Each member's turn is a `message`
step with the member's name as role; everything the member does is nested under it. Members run
one after another, never concurrently: replay answers recorded LLM calls in order.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, ClassVar

from agentlab.paradigms._multi_agent_modes import (
    FINISH,
    Member,
    majority,
    members_for,
    read_route,
    route_format,
)
from agentlab.paradigms._multi_agent_modes import final_answer as read_final
from agentlab.paradigms.parsing import ParseError
from agentlab.paradigms.prompt_files import fill, load_prompt
from agentlab.paradigms.registry import Paradigm, register_paradigm
from agentlab.runtime.limits import IterationLimit, LoopDetected
from traces.schema import Step

if TYPE_CHECKING:
    from agentlab.runtime.context import RunContext

MEMBER_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "default": ""},
        "agent": {"type": "string", "default": "",
                  "description": "Name of a configured agent to run as this member."},
        "instructions": {"type": "string", "default": "",
                         "description": "System prompt of an inline member."},
        "tools": {"type": "boolean", "default": False,
                  "description": "Inline member answers as a ReAct sub-run with tools."},
    },
    "required": ["name"],
    "additionalProperties": False,
}


@register_paradigm
class MultiAgent(Paradigm):
    key: ClassVar[str] = "multi_agent"
    label: ClassVar[str] = "Multi-Agent"
    description: ClassVar[str] = (
        "Several agents work on one task: they debate and a judge or a vote decides, pass it "
        "along a pipeline of roles, or a supervisor routes it between workers.")
    demo_question: ClassVar[str] = (
        "Is today better for an outdoor run in Paris or in London? Compare the weather and the "
        "air quality in both cities and recommend one.")
    params_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "mode": {"enum": ["debate", "pipeline", "supervisor"], "default": "debate"},
            "members": {"type": "array", "items": MEMBER_SCHEMA, "default": [],
                        "description": "Empty: the mode's default members."},
            "rounds": {"type": "integer", "minimum": 1, "maximum": 10, "default": 2,
                       "description": "Debate rounds."},
            "decide": {"enum": ["judge", "majority"], "default": "judge",
                       "description": "How a debate ends (a tied vote goes to the judge)."},
            "max_turns": {"type": "integer", "minimum": 1, "maximum": 30, "default": 6,
                          "description": "Supervisor turns before routing is stopped."},
        },
        "additionalProperties": False,
    }

    async def run(self, ctx: RunContext, task: str) -> str:
        """Run the members in the configured mode and return the team's answer."""
        p = self.params_of(ctx)
        self.ctx, self.task, self.mode = ctx, task, p["mode"]
        members = members_for(p["mode"], p["members"])
        for m in members:
            if m.agent and m.agent not in ctx.agents:
                raise ValueError(f"member {m.name}: no agent named {m.agent}")
        if p["mode"] == "debate":
            return await self._debate(members, p["rounds"], p["decide"])
        if p["mode"] == "pipeline":
            return await self._pipeline(members)
        return await self._supervise(members, p["max_turns"])

    # ------------------------------------------------------------ one member's turn

    async def _turn(self, member: Member, prompt: str, name: str, **meta: Any) -> str:
        ctx, started = self.ctx, time.perf_counter()
        msg = await ctx.emit(Step(kind="message", role=member.name, name=name, input=prompt,
                                  status="running", meta={"mode": self.mode, **meta}))
        try:
            text = (await self._answer_as(member, prompt, msg.seq)).strip()
        except (IterationLimit, LoopDetected) as exc:  # the member's own limit: the team goes on
            text = f"({member.name} gave no answer: {exc.reason})"
        except BaseException:  # the run's limits, cancel, model errors: close the step, re-raise
            await ctx.finish(msg, status="error", started=started)
            raise
        else:
            if text:
                await ctx.finish(msg, started=started, text=text, output=text)
                return text
            text = f"({member.name} gave an empty answer)"
        await ctx.emit(Step(kind="error", role=member.name, parent=msg.seq, status="error",
                            text=text))
        await ctx.finish(msg, status="error", started=started, text=text, output=text)
        return text

    async def _answer_as(self, member: Member, prompt: str, parent: int) -> str:
        ctx = self.ctx
        if member.agent:
            return await ctx.run_agent(ctx.agents[member.agent], prompt, role=member.name,
                                       parent=parent)
        instructions = member.instructions or f"You are {member.name}."
        if member.tools:
            return await ctx.sub_run("react", prompt, role=member.name, parent=parent,
                                     system_prompt=instructions,
                                     params={"mode": "json", "max_iterations": 4})
        result = await ctx.llm(member.name, [{"role": "system", "content": instructions},
                                             *ctx.history, {"role": "user", "content": prompt}],
                               parent=parent)
        return result.text or ""

    # ------------------------------------------------------------ debate

    async def _debate(self, members: list[Member], rounds: int, decide: str) -> str:
        answers: dict[str, str] = {}
        for r in range(1, rounds + 1):
            latest = {}
            for m in members:  # each sees the others' answers of the previous round
                if r == 1:
                    prompt = fill(load_prompt("multi_agent_debate_first.txt"), task=self.task)
                else:
                    others = "\n\n".join(f"{name}: {text}" for name, text in answers.items()
                                         if name != m.name)
                    prompt = fill(load_prompt("multi_agent_debate_round.txt"), task=self.task,
                                  own=answers[m.name], others=others or "(none)")
                latest[m.name] = await self._turn(m, prompt, f"round {r}", round=r)
            answers = latest
        if decide == "majority":
            winner, votes = majority(answers)
            await self.ctx.emit(Step(
                kind="evaluation", role="judge", name="majority vote", output={"votes": votes},
                text=(f"Majority: {winner}" if winner is not None else
                      "The vote is tied; the judge decides.")))
            if winner is not None:
                return winner
        return await self._judge(answers)

    async def _judge(self, answers: dict[str, str]) -> str:
        listing = "\n\n".join(f"{name}: {read_final(text)}" for name, text in answers.items())
        request = fill(load_prompt("multi_agent_judge_request.txt"), task=self.task,
                       answers=listing)
        msg = await self.ctx.emit(Step(kind="message", role="judge", name="verdict",
                                       input=request, status="running"))
        started = time.perf_counter()
        result = await self.ctx.llm("judge", [
            {"role": "system", "content": load_prompt("multi_agent_judge.txt")},
            {"role": "user", "content": request}], parent=msg.seq)
        text = (result.text or "").strip()
        await self.ctx.finish(msg, started=started, text=text, output=text,
                              status="ok" if text else "error")
        return read_final(text)

    # ------------------------------------------------------------ pipeline

    async def _pipeline(self, members: list[Member]) -> str:
        output, previous = self.task, None
        for stage, m in enumerate(members, 1):
            prompt = self.task if previous is None else fill(
                load_prompt("multi_agent_pipeline_stage.txt"), task=self.task,
                previous_name=previous, previous=output)
            output, previous = await self._turn(m, prompt, f"stage {stage}", stage=stage), m.name
        return output

    # ------------------------------------------------------------ supervisor

    async def _supervise(self, members: list[Member], max_turns: int) -> str:
        ctx, workers = self.ctx, {m.name.casefold(): m for m in members}
        names = [m.name for m in members]
        system = fill(load_prompt("multi_agent_supervisor.txt"), names=", ".join(names),
                      workers="\n".join(f"- {m.name}: {m.instructions or m.agent}"
                                        for m in members))
        log: list[str] = []
        note, last = "", ""
        for turn in range(1, max_turns + 1):
            work = "\n\n".join(log) or "(nothing yet)"
            request = fill(load_prompt("multi_agent_supervisor_request.txt"), task=self.task,
                           work=work, note=f"\nNote: {note}\n" if note else "")
            result = await ctx.llm("supervisor", [{"role": "system", "content": system},
                                                  {"role": "user", "content": request}],
                                   response_format=route_format(names))
            try:
                route = read_route(result.text or "")
            except ParseError as exc:
                ctx.totals.format_errors += 1
                note = await self._router_error(str(exc), result.text, format_error=True)
                continue
            if route.next.upper() == FINISH:
                if answer := (route.answer or last):
                    return answer
                note = await self._router_error(
                    "FINISH needs an answer, and no worker has answered yet.", result.text)
                continue
            member = workers.get(route.next.casefold())
            if member is None:
                note = await self._router_error(
                    f"{route.next!r} is not a worker. Valid names: {', '.join(names)} or "
                    f"{FINISH}.", result.text, unknown_worker=True)
                continue
            prompt = fill(load_prompt("multi_agent_worker.txt"), task=self.task, work=work,
                          instruction=route.instruction or "Do your part of the task.")
            last = await self._turn(member, prompt, f"turn {turn}", turn=turn,
                                    instruction=route.instruction)
            log.append(f"Turn {turn}: {member.name} was asked: {route.instruction}\n"
                       f"{member.name} answered: {last}")
            note = ""
        await ctx.emit(Step(kind="error", role="supervisor", status="error",
                            meta={"turn_limit": True},
                            text=f"The supervisor did not finish within max_turns ({max_turns}); "
                                 "routing was stopped and the last worker's output is the "
                                 "answer."))
        if not last:
            raise IterationLimit(f"the supervisor used its {max_turns} turns without any "
                                 "worker answering")
        return last

    async def _router_error(self, message: str, raw: str | None, **meta: Any) -> str:
        """Record a routing mistake as an error step; the text goes back to the router."""
        await self.ctx.emit(Step(kind="error", role="supervisor", status="error", input=raw,
                                 text=f"Routing error: {message}", meta=meta))
        return message
