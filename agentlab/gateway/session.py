"""One gateway run in this process: its steps, its control and how it follows a record.

A session turns the agent's requests into the run's steps (persisted, then published, by the
run's Recorder): the tool results a request carries for the calls of the reply before it become
`tool` steps, the request itself an `llm` step with the whole request and response. Before
each it asks the run's control (pause, step mode, breakpoints), so a call can be held, edited
or answered by the person; an edited tool result is substituted in every later request (the
agent keeps sending its own). A replay or fork session answers from the record while the
requests match it (agentlab.llm.replay.Recording), marking each step with where its reply
came from, and the first request that differs with why.

What costs the agent time is recorded off its call (agentlab.gateway.later).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async

from agentlab.gateway.control import GatewayControl
from agentlab.gateway.grouping import normal_request, tool_results, with_result
from agentlab.gateway.later import Later
from agentlab.gateway.protocol import ChatRequest, GatewayError
from agentlab.guardrails.checks import Check
from agentlab.guardrails.decisions import decision_step
from agentlab.llm.replay import Outcome, Recording, marks, result_from_dict
from agentlab.llm.types import ChatResult
from agentlab.runs.recorder import Recorder
from agentlab.runs.registry import REGISTRY
from agentlab.runtime.guard import RunGuard, blocked
from agentlab.runtime.limits import Totals
from traces.models import Run
from traces.schema import Step


@dataclasses.dataclass
class Plan:
    """How a replay or fork session follows its source run."""

    recording: Recording
    # tool call id -> the observation put in its place in every request
    substitutions: dict[str, str] = dataclasses.field(default_factory=dict)
    stop_on_divergence: bool = False


@dataclasses.dataclass
class _Call:  # a tool call of a reply, until the agent sends its result
    name: str
    arguments: Any
    replied_at: float


class Session:
    def __init__(self, run_id: int, user_id: int, *, checks: tuple[Check, ...] = (),
                 plan: Plan | None = None, hold_s: float | None = None, seq: int = 0,
                 on_end: Callable[[Session], None] | None = None,
                 held_now: Callable[[], int] | None = None) -> None:
        self.run_id, self.user_id = run_id, user_id
        self.recorder = Recorder(run_id, ahead=lambda: True)
        self.control = GatewayControl(run_id, cancel_run=self._cancel_run, hold_s=hold_s)
        self.control.held_now = held_now
        REGISTRY.put(run_id, control=self.control)
        self.guard = RunGuard(checks) if checks else None
        self.plan = plan
        self.substitutions = dict(plan.substitutions) if plan else {}
        self.seq = seq
        self.calls: dict[str, _Call] = {}
        self.totals = Totals()
        self.started = time.monotonic()
        self.last_seen = time.monotonic()
        self.in_flight = 0
        self.held = 0
        self.last_text, self.last_error = "", ""
        self.first_divergence: dict[str, Any] | None = None
        self.cancelled = self.ended = False
        self.keys: list[tuple[int, str]] = []  # its entries in the table's index
        self.call_ids: list[str] = []  # the tool call ids its replies gave
        self.on_end = on_end
        self.later = Later(run_id, self.recorder.running, self.record)

    # ------------------------------------------------------------------ steps

    def _next(self) -> int:
        self.seq += 1
        return self.seq

    async def record(self, step: Step) -> Step:
        """Persist, then publish, the step as the guardrails let it be seen (returned: what
        a hold may show); a block on a reply or a tool result refuses the request (the
        recorded step stays, redacted)."""
        self.later.settled(step)
        shown, decisions = await self.guard.astep(step) if self.guard else (step, [])
        await self.recorder.step(shown)
        await self.control.step(step)  # breakpoints after a step (a failed call)
        for decision in decisions:
            await self.recorder.step(_numbered(decision_step(decision, step), self._next()))
        if (stop := blocked(decisions)) is not None:
            raise GatewayError(400, f"Blocked by the guardrail {stop.guardrail}: {stop.message}",
                               code="guardrail_blocked", retry=False)
        return shown

    async def hold(self, step: Step, shown: Step) -> dict[str, Any] | None:
        """The run's control before a call: None, or what the person edited. The pause
        shows (on the socket, /runs/<id>/control, the run's status) the step as recorded,
        redacted: `shown`. A hold that outlives AGENTLAB_GATEWAY_HOLD_S, a cancel or a
        refused hold (too many held, the run over) answers the agent with an error; the step
        says why it never went on (it never stays `running` on the page)."""
        try:
            return await self._hold(step, shown)
        except GatewayError as exc:
            if step.status == "running":
                await self._never_went_on(step, exc.message)
            raise

    async def _hold(self, step: Step, shown: Step) -> dict[str, Any] | None:
        self.refuse_if_over()
        self.held += 1
        try:
            async with asyncio.timeout(self.control.hold_s):
                return await self.control.checkpoint(shown)
        except TimeoutError:
            await self.control.announce()
            hold = self.control.hold_s
            error = GatewayError(504, f"This call was held at a breakpoint in Agent Lab for "
                                      f"{hold:g} s (AGENTLAB_GATEWAY_HOLD_S), longer than a "
                                      "client waits; nothing was sent on.",
                                 type="timeout", code="held_too_long", retry=False)
            await self._never_went_on(step, error.message)
            raise error from None
        except asyncio.CancelledError:
            if not self.cancelled:  # the client went away while its call was held
                await self._never_went_on(step, "the client closed the connection while the "
                                                "call was held")
                raise
            await self._never_went_on(step, "the run was cancelled while the call was held")
            raise self.cancelled_error() from None
        finally:
            self.held -= 1

    async def _never_went_on(self, step: Step, why: str) -> None:
        step.status, step.text = "error", why
        step.output = {"error": why, "kind": "held"}
        await self.record(step)  # as the guardrails let it be seen, like every step

    def refuse_if_over(self) -> None:
        if self.cancelled:
            raise self.cancelled_error()
        if self.ended:
            raise GatewayError(409, "This gateway run has ended; start the program again for "
                                    "a new run.", code="run_ended", retry=False)

    @staticmethod
    def cancelled_error() -> GatewayError:
        return GatewayError(409, "The run was cancelled in Agent Lab.", code="run_cancelled",
                            retry=False)

    def _unwatched(self, step: Step) -> bool:
        """Whether `step` may go on without its `running` version: no guardrail reads it
        (one may refuse the request) and the control will not hold it now (asked and acted
        on in one go: nothing can pause the run in between). Then it gets one only if it
        is still open after later.SLOW_S. A run cancelled or ended goes the held way: refused there,
        with the step saying why."""
        if (self.guard is not None or self.cancelled or self.ended
                or self.control.reason_to_pause(step) is not None):
            return False
        self.later.watch(step)
        return True

    async def tool_results(self, messages: list[dict[str, Any]]) -> None:
        """Record the tool results this request carries for the calls of earlier replies
        (each once), holding at a tool breakpoint; edits join the substitutions."""
        for _index, call_id, sent in tool_results(messages):
            if call_id not in self.calls:
                continue
            call = self.calls.pop(call_id)
            text = self.substitutions.get(call_id, sent)
            step = Step(seq=self._next(), kind="tool", name=call.name, input=call.arguments,
                        status="running", started_at=call.replied_at,
                        meta={"call_id": call_id, "ran_by": "agent"})
            if call_id in self.substitutions:
                step.meta["edited"] = True
            edit = None
            if not self._unwatched(step):
                shown = await self.record(step)
                # Held, the page shows (and offers to edit) the result the agent sent,
                # redacted as the trace will have it; its guardrail decisions come with the
                # finished step.
                held = dataclasses.replace(shown, text=await self._redacted(text))
                edit = await self.hold(step, held)
                if edit is not None and edit["observation"] == held.text:
                    edit = None  # sent back as shown (maybe redacted): the agent's own stays
            if edit is not None:
                text = self.substitutions[call_id] = edit["observation"]
                step.meta["edited"] = True
            step.output = {"tool": call.name, "arguments": call.arguments, "ok": True,
                           "output": text, "observation": text}
            step.text, step.status = text, "ok"
            step.duration_ms = (time.time() - call.replied_at) * 1000
            self.totals.tool_calls += 1
            await self.record(step)

    async def _redacted(self, text: str) -> str:
        if self.guard is None:
            return text
        return (await self.guard.adetail({"answer": text}))["answer"]

    def substituted(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The conversation with every edited tool result in place of the agent's own."""
        if not self.substitutions:
            return messages
        out = list(messages)
        for index, call_id, _text in tool_results(messages):
            if call_id in self.substitutions:
                out[index] = with_result(out[index], self.substitutions[call_id])
        return out

    async def open_call(self, request: ChatRequest, model: str
                        ) -> tuple[Step, ChatRequest, ChatResult | None]:
        """The llm step, held if asked: the request to send (maybe edited), and the reply
        when it needs no model (served from the record, or written by the person)."""
        step = Step(seq=self._next(), kind="llm", name=model, input=request.recorded(),
                    status="running")
        edit = None
        if not self._unwatched(step):
            shown = await self.record(step)
            edit = _changed(await self.hold(step, shown), shown)
        if edit is not None:
            step.meta["edited"] = True
            if "response" in edit:
                step.meta["answered_by"] = "person"
                return step, request, _written(edit["response"])
            request = request.with_fields(edit)
            step.input = request.recorded()
        if self.plan is None:
            return step, request, None
        outcome, result = self.plan.recording.take(normal_request(request.recorded()))
        self._mark(step, outcome)
        if result is None and outcome.divergence is not None and self.plan.stop_on_divergence:
            await self.fail_call(step, f"the replay diverged: {outcome.divergence.detail}")
            raise GatewayError(409, f"Agent Lab's replay stopped where the program left its "
                                    f"record: {outcome.divergence.detail}.",
                               code="replay_diverged", retry=False)
        return step, request, result

    def _mark(self, step: Step, outcome: Outcome) -> None:
        step.meta.update(marks(outcome))
        if outcome.divergence is not None and self.first_divergence is None:
            self.first_divergence = {"seq": step.seq, **outcome.divergence.to_dict()}

    async def close_call(self, step: Step, result: ChatResult, started: float, *,
                         sending: bool = False) -> None:
        """The call answered: its step finished. `sending`: recorded once the reply went out
        (`later.after_sent`) when no guardrail must read it first, not before."""
        step.output, step.text, step.status = result.to_dict(), result.text or "", "ok"
        step.name = result.model or step.name
        step.tokens_in, step.tokens_out = result.usage.prompt_tokens, result.usage.completion_tokens
        step.cost_usd = result.cost_usd or 0.0
        step.duration_ms = (time.perf_counter() - started) * 1000
        if result.profile:
            step.meta.update(profile=result.profile, attempts=result.attempts,
                             ttft_ms=result.ttft_ms)
        now = time.time()
        for call in result.tool_calls:
            self.calls[call.id] = _Call(call.name, call.arguments if call.arguments is not None
                                        else call.raw_arguments, now)
        t = self.totals
        t.llm_calls += 1
        t.tokens_in += step.tokens_in
        t.tokens_out += step.tokens_out
        t.cost_usd += step.cost_usd
        self.last_text, self.last_error = result.text or "", ""
        if sending and self.guard is None:
            self.later.hold_back(step)
            return
        await self.record(step)

    async def fail_call(self, step: Step, error: str, kind: str = "error") -> None:
        step.output, step.text, step.status = {"error": error, "kind": kind}, error, "error"
        self.totals.llm_calls += 1
        self.last_error = error
        await self.record(step)

    # ------------------------------------------------------------------ the run's end

    def _cancel_run(self, run_id: int) -> bool:
        if self.ended or self.cancelled:
            return False
        self.cancelled = True
        asyncio.get_running_loop().create_task(self.end("cancelled",
                                                        error="Cancelled in Agent Lab."))
        return True

    async def end(self, status: str = "", *, error: str = "") -> None:
        """End the run: succeeded with its last reply (failed when its last call failed),
        or the status given; the first divergence goes into the run's snapshot."""
        if self.ended:
            return
        self.ended = True
        await self.later.drain()  # a reply still being sent: its step before the status
        status = status or ("failed" if self.last_error else "succeeded")
        error = error or (self.last_error if status == "failed" else "")
        if status == "succeeded" and self.last_text:
            await self.record(Step(seq=self._next(), kind="final", text=self.last_text,
                                   output=self.last_text))
        self.totals.wall_ms = (time.monotonic() - self.started) * 1000
        detail: dict[str, Any] = {"totals": self.totals.as_dict()}
        detail |= {"answer": self.last_text} if status == "succeeded" else {"error": error}
        if self.guard is not None:
            detail = await self.guard.adetail(detail)
        if self.plan is not None:
            await sync_to_async(_save_summary, thread_sensitive=False)(
                self.run_id, self.plan.recording, self.first_divergence)
        await self.recorder.status(status, detail)
        REGISTRY.clear(self.run_id, "control", only=self.control)
        if self.on_end is not None:
            self.on_end(self)


def _numbered(step: Step, seq: int) -> Step:
    step.seq = seq
    return step


def _changed(edit: dict[str, Any] | None, shown: Step) -> dict[str, Any] | None:
    """The request fields the person changed: one sent back as they were shown it (a
    redacted value) stays as the agent sent it (as agentlab.runtime.context.checkpoint)."""
    if edit is None or "response" in edit or not isinstance(shown.input, dict):
        return edit
    return {k: v for k, v in edit.items() if v != shown.input.get(k)} or None


def _written(response: dict[str, Any]) -> ChatResult:
    """A reply the person wrote at a hold ({"text", "tool_calls": [{name, arguments}]})."""
    result = result_from_dict({**response, "model": "written in Agent Lab"})
    if result.tool_calls and not result.finish_reason:
        result = dataclasses.replace(result, finish_reason="tool_calls")
    return result


def _save_summary(run_id: int, recording: Recording,
                  first_divergence: dict[str, Any] | None) -> None:
    run = Run.objects.only("agent_snapshot").get(pk=run_id)
    snap = dict(run.agent_snapshot)
    snap["replay"] = {**snap.get("replay", {}), "served": list(recording.served),
                      "unused": recording.unused}
    if first_divergence is not None:
        snap["first_divergence"] = first_divergence
    Run.objects.filter(pk=run_id).update(agent_snapshot=snap)
