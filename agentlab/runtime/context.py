"""RunContext: the one object a paradigm talks to (models, tools, steps, budgets, hooks).
Its tool calls (loop check, approval, checkpoint, run) are in agentlab/runtime/tool_calls.py."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from agentlab.guardrails.decisions import decision_step
from agentlab.llm import gate
from agentlab.llm.errors import ContextTooLong, LLMError
from agentlab.runtime import slots, window
from agentlab.runtime.guard import RunGuard, blocked
from agentlab.runtime.limits import (
    BudgetExceeded,
    Limits,
    RunCancelled,
    Totals,
    deadline_lifted,
)
from agentlab.runtime.scopes import AgentSpec, ParadigmLookup, ScopedContext
from agentlab.runtime.sinks import StepSink
from agentlab.runtime.tool_calls import Approval, LoopHook, ToolCalls, deny_all
from agentlab.tools.executor import ToolResult
from traces.schema import Step, normalise_args

__all__ = ["Approval", "RunContext", "deny_all", "normalise_args"]

if TYPE_CHECKING:
    from agentlab.llm.types import ChatModel, ChatResult
    from agentlab.tools.executor import ToolExecutor

SERVER_COUNT_MARGIN = 1.05  # refitting to a server's own count, keep 5 % spare
# No tokenizer makes more than a token a byte, ~3.5 times our estimate of lowercase text: a
# server that claims more is not believed further.
MAX_SERVER_RATIO = 4.0
RECENT_STEPS = 16  # finished steps an output judge's block looks through for the answer
CheckpointHook = Callable[[Step], Awaitable[dict[str, Any] | None]]


class RunContext(ToolCalls, ScopedContext):
    """Everything a paradigm needs: ctx.llm, ctx.tool, ctx.emit, ctx.checkpoint, budgets."""

    def __init__(
        self,
        *,
        models: Mapping[str, ChatModel],
        executor: ToolExecutor,
        sink: StepSink,
        limits: Limits | None = None,
        params: dict[str, Any] | None = None,
        system_prompt: str = "",
        history: list[dict[str, Any]] | None = None,
        checkpoint: CheckpointHook | None = None,
        approver: Callable[[Step], Awaitable[Approval]] | None = None,
        agents: Mapping[str, AgentSpec] | None = None,
        paradigms: ParadigmLookup | None = None,
        guard: RunGuard | None = None,
    ) -> None:
        if "default" not in models:
            raise ValueError("models needs a 'default' entry (other keys are roles)")
        self.models = models
        self._executor = executor
        self.sink = sink
        self.agents = dict(agents or {})  # other agents by name, for Multi-Agent members
        self.paradigms = paradigms  # for sub-runs by paradigm key (ctx.sub_run, ctx.run_agent)
        self.guard = guard  # the run's guardrails: every step is redacted before the sink
        self.limits = limits or Limits()
        self._params = dict(params or {})
        self._system_prompt = system_prompt
        self._history = list(history or [])
        self._init_scope()
        self.approver = approver or deny_all
        self.checkpoint_hook = checkpoint
        self.on_loop: LoopHook | None = None  # set by a paradigm that turns loops into nudges
        self.totals = Totals()
        self.findings: list[str] = []  # observations of successful tool calls, in order
        self.cancelled = False
        self._seq = 0
        self._steps_counted = 0
        self.timeout: asyncio.Timeout | None = None  # the total timeout, set by execute()
        self._open: dict[int, Step] = {}  # emitted steps still `running`, by seq
        # What the sink was shown of each step still `running` (redacted): what a pause or an
        # approval puts on a socket, never the runtime's own step.
        self._shown: dict[int, Step] = {}
        # The last finished steps (the runtime's own), for an output judge's block to withhold
        # the answer it blocked from every step that carries it.
        self._recent: collections.deque[Step] = collections.deque(maxlen=RECENT_STEPS)
        self._calls: list[str] = []  # "name args" of each tool call, for loop detection
        self._answered: dict[str, tuple[int, ToolResult]] = {}  # "name args" -> (seq, result)
        self._answering = False  # the last call after a limit: budgets no longer apply
        # profile -> (the server's context window, its tokens per estimated token), learnt from
        # a server that said "too long" after all
        self._server_windows: dict[str, tuple[int | None, float]] = {}
        self._task: asyncio.Task[Any] | None = None  # the paradigm's task, set by execute()
        self._started = time.monotonic()

    # ------------------------------------------------------------------ steps and hooks

    async def emit(self, step: Step, *, counted: bool = True) -> Step:
        """Send `step` to the sink; a new step (seq 0) gets the next seq, else it is an update."""
        if step.seq == 0:
            scope = self._scope.get()
            if step.parent is None and scope.parent is not None:
                step.parent = scope.parent
            if scope.role and step.role == "agent":
                step.role = scope.role
            over = self._steps_counted >= self.limits.max_steps and not self._answering
            if counted and over:
                raise BudgetExceeded(f"reached the limit of {self.limits.max_steps} steps")
            self._seq += 1
            step.seq = self._seq
            self._steps_counted += counted
        if step.status == "running":
            self._open[step.seq] = step
        else:
            self._open.pop(step.seq, None)
        shown, decisions = await self.guard.astep(step) if self.guard is not None else (step, [])
        if step.status == "running":
            self._shown[step.seq] = shown
        else:
            self._shown.pop(step.seq, None)
            if step.kind != "guardrail":
                self._recent.append(step)
        async with slots.waiting():
            await self.sink.step(shown)
        if decisions:
            await self._decided(decisions, step)
        return step

    async def _decided(self, decisions: list[dict[str, Any]], target: Step | None) -> None:
        """Record the guardrails' decisions about `target` (None: the question), each a
        `guardrail` step; a block stops the run (not the one answer after a limit)."""
        for decision in decisions:
            await self.emit(decision_step(decision, target), counted=False)
        if not self._answering and (exc := blocked(decisions)) is not None:
            raise exc

    async def check_question(self, question: str) -> None:
        """The input guardrails' decisions (made when the run was created, and the input
        judges'), before the paradigm sees the question."""
        if self.guard is not None:
            await self._decided(await self.guard.question(question), None)

    async def check_answer(self, answer: Any) -> Any:
        """The output judges on the paradigm's answer. A block withholds the answer from
        every recorded step that carries it (the model's reply, a thought) before the
        decision is recorded: the record keeps that it was withheld, never the text."""
        if self.guard is not None and self.guard.output_judges and isinstance(answer, str):
            decisions = await self.guard.answer(answer)
            if not self._answering and (exc := blocked(decisions)) is not None:
                await self._withhold(answer, exc.guardrail)
            await self._decided(decisions, None)
        return answer

    async def _withhold(self, answer: str, guardrail: str) -> None:
        """Replace `answer` in the last finished steps by a marker and record them again."""
        forms = {answer.strip(), json.dumps(answer.strip())[1:-1]} - {""}
        if not forms:
            return
        mark = f"[withheld: {guardrail}]"
        for step in list(self._recent):
            fields = {name: _without(getattr(step, name), forms, mark)
                      for name in ("text", "output", "input", "meta")}
            if all(fields[name] is getattr(step, name) for name in fields):
                continue
            for name, value in fields.items():
                setattr(step, name, value)
            step.meta = {**step.meta, "withheld": guardrail}
            await self.emit(step)

    async def close_open_steps(self, reason: str) -> None:
        """Finish every step still `running` (a plan item, a node, a member's message) when
        the run ends early, so none stays running in the trace."""
        for step in list(self._open.values()):
            step.meta = {**step.meta, "unfinished": reason}
            await self.finish(step, status="error")

    async def finish(self, step: Step, *, status: str = "ok", started: float | None = None,
                     **fields: Any) -> Step:
        """Update an emitted step with its result and duration and send it again."""
        for name, value in fields.items():
            setattr(step, name, value)
        step.status = status  # type: ignore[assignment]
        if started is not None:
            step.duration_ms = (time.perf_counter() - started) * 1000
        return await self.emit(step)

    def own(self, step: Step) -> Step:
        """The runtime's own step for one it showed (`shown`), while it runs."""
        return self._open.get(step.seq, step)

    def shown(self, step: Step) -> Step:
        """What the sink was shown of `step`, still running (redacted by the guardrails):
        what a pause or an approval may show a person, never the runtime's own step."""
        return self._shown.get(step.seq, step)

    async def checkpoint(self, step: Step) -> dict[str, Any] | None:
        """Give the pause/step/breakpoint hook a pending step (as the sink was shown it);
        returns edited input or None. What the person sent back unchanged from what they were
        shown (a redacted value) stays as the runtime had it."""
        self.raise_if_cancelled()
        if self.checkpoint_hook is None:
            return None
        shown = self.shown(step)
        with deadline_lifted(self.timeout):
            async with slots.waiting():  # a pause may last: others compute meanwhile
                edited = await self.checkpoint_hook(shown)
        self.raise_if_cancelled()  # the user may have cancelled while the run was paused
        if edited is None or shown is step:
            return edited
        if step.kind == "llm" and isinstance(edited, dict) and isinstance(shown.input, dict):
            edited = {k: v for k, v in edited.items()
                      if normalise_args(v) != normalise_args(shown.input.get(k))}
            return edited or None
        return None if normalise_args(edited) == normalise_args(shown.input) else edited

    def cancel(self) -> None:
        """Stop the run as soon as possible (also interrupts a running LLM or tool call)."""
        self.cancelled = True
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def raise_if_cancelled(self) -> None:
        if self.cancelled:
            raise RunCancelled("the run was cancelled")

    # ------------------------------------------------------------------ the LLM

    @contextlib.contextmanager
    def answering(self) -> Iterator[None]:
        """The one call that answers after a limit stopped the run (runtime/answer.py): it
        may go past the step and LLM-call budgets that stopped it."""
        self._answering = True
        try:
            yield
        finally:
            self._answering = False

    def _check_llm_budget(self) -> None:
        if self._answering:
            return
        limits, totals = self.limits, self.totals
        if totals.llm_calls >= limits.max_llm_calls:
            raise BudgetExceeded(f"reached the limit of {limits.max_llm_calls} LLM calls")
        if limits.token_budget is not None and totals.tokens >= limits.token_budget:
            raise BudgetExceeded(
                f"used {totals.tokens} tokens, over the budget of {limits.token_budget}"
            )

    async def llm(self, role: str, messages: list[dict[str, Any]], *, tools: list | None = None,
                  tool_choice: Any = None, response_format: dict | None = None,
                  stop: list[str] | None = None, temperature: float | None = None,
                  max_tokens: int | None = None, parent: int | None = None,
                  meta: dict[str, Any] | None = None) -> ChatResult:
        """One recorded model call: budgets first, the prompt fitted to the model's context
        window, then an `llm` step with the request as sent and the reply."""
        self.raise_if_cancelled()
        self._check_llm_budget()
        role = self._scoped_role(role)
        model = self.model_for(role)
        # A copy: the paradigm keeps appending to its list, the step keeps what was sent.
        request = {"messages": list(messages), "tools": tools, "tool_choice": tool_choice,
                   "response_format": response_format, "stop": stop,
                   "temperature": temperature, "max_tokens": max_tokens}
        try:
            trimmed = self._fit(model, request, messages)
        except window.PromptTooLong as exc:
            await self._refused_llm(model, request, exc, role=role, parent=parent)
            raise
        step = await self.emit(Step(kind="llm", role=role, name=model.profile_name,
                                    parent=parent, input=request, status="running",
                                    meta={**(meta or {}),
                                          **({"trimmed": trimmed} if trimmed else {})}))
        edited = await self.checkpoint(step)
        self.totals.llm_calls += 1
        seq, started = step.seq, time.perf_counter()

        lines = self.guard.tokens() if self.guard is not None else None

        async def on_token(delta: str) -> None:
            if lines is not None and not (delta := await lines.afeed(delta)):
                return
            await self.sink.token(seq, delta)

        try:
            if edited:
                request.update({k: v for k, v in edited.items() if k in request})
                step.meta["edited"] = True
                # An edit may not fit: fit what the person wrote.
                self._record_fit(step, self._fit(model, request, request["messages"]))
            result = await self._chat(model, request, on_token, step,
                                      request["messages"] if edited else messages)
        except LLMError as exc:
            started += self._queued_s(step)  # the model's own time, not its queue's
            self.totals.model_ms += (time.perf_counter() - started) * 1000
            await self.finish(step, status="error", started=started,
                              output={"error": str(exc), "kind": exc.kind}, text=str(exc))
            raise
        except asyncio.CancelledError:
            await self._interrupted(step, started + self._queued_s(step))
            raise
        started += self._queued_s(step)
        elapsed = (time.perf_counter() - started) * 1000
        self.totals.model_ms += elapsed
        usage = result.usage
        tokens_in, tokens_out = (usage.prompt_tokens, usage.completion_tokens) if usage else (0, 0)
        self.totals.tokens_in += tokens_in
        self.totals.tokens_out += tokens_out
        self.totals.cost_usd += result.cost_usd or 0.0
        step.name = result.model or step.name
        step.meta.update(profile=result.profile, attempts=result.attempts, ttft_ms=result.ttft_ms)
        await self.finish(step, output=result.to_dict(), text=result.text or "",
                          tokens_in=tokens_in, tokens_out=tokens_out,
                          cost_usd=result.cost_usd or 0.0, started=started)
        return result

    async def _chat(self, model: ChatModel, request: dict[str, Any],
                    on_token: Callable[[str], Awaitable[None]], step: Step,
                    messages: list[dict[str, Any]]) -> ChatResult:
        """The call; when the server counts the prompt over its window after all (its tokenizer
        is not our estimate), fit once more to its count and ask again."""
        for attempt in range(2):
            try:
                with gate.listening(self._waiting_for_model(step)):
                    async with slots.waiting():
                        return await model.chat(
                            request["messages"], tools=request["tools"],
                            tool_choice=request["tool_choice"],
                            response_format=request["response_format"],
                            stop=request["stop"], temperature=request["temperature"],
                            max_tokens=request["max_tokens"], on_token=on_token)
            except ContextTooLong as exc:
                if attempt or not self._learn_window(model, request, exc):
                    raise
                try:
                    self._record_fit(step, self._fit(model, request, messages), server=exc)
                except window.PromptTooLong:
                    raise exc from None  # the server's own words and counts say it best
        raise AssertionError("unreachable")  # the loop returns or raises

    def _waiting_for_model(self, step: Step) -> gate.QueueListener:
        """What a wait for a busy model's turn does (agentlab/llm/gate.py): the run's deadline
        is lifted meanwhile (the wait is not the agent's time), the running step says so
        (meta.waiting_for_model: the page shows "waiting for the model") and then keeps how
        long it waited (meta.queued_ms, also in the run's totals)."""

        @contextlib.asynccontextmanager
        async def waiting(ahead: int) -> AsyncIterator[None]:
            began = time.perf_counter()
            with deadline_lifted(self.timeout):
                step.meta["waiting_for_model"] = {"ahead": ahead, "since": time.time()}
                await self.emit(step)
                try:
                    yield
                finally:
                    waited = (time.perf_counter() - began) * 1000
                    step.meta.pop("waiting_for_model", None)
                    step.meta["queued_ms"] = round(step.meta.get("queued_ms", 0.0) + waited, 1)
                    self.totals.queued_ms += waited
            await self.emit(step)  # its turn: the page shows the call going on

        return waiting

    @staticmethod
    def _queued_s(step: Step) -> float:
        return step.meta.get("queued_ms", 0.0) / 1000

    def _fit(self, model: ChatModel, request: dict[str, Any],
             messages: list[dict[str, Any]]) -> dict[str, Any] | None:
        """Set request["messages"] to `messages` fitted to the model's window
        (runtime/window.py); returns what was cut, for the step's meta.trimmed, or None when
        nothing was. A model that states no window is sent everything."""
        known = getattr(model, "window", None)
        if known is None:
            return None
        limit, ratio = self._server_windows.get(model.profile_name, (None, 1.0))
        reply = min(filter(None, (request["max_tokens"], known.max_tokens)), default=None)
        budget = window.Budget.of(min(known.tokens, limit or known.tokens), reply)
        fitted = window.fit(messages, budget, history=self.history,
                            fixed=window.fixed_tokens(request["tools"],
                                                      request["response_format"]),
                            ratio=ratio, model=model.profile_name)
        request["messages"] = fitted.messages
        return fitted.meta() if fitted.trimmed else None

    def _learn_window(self, model: ChatModel, request: dict[str, Any],
                      exc: ContextTooLong) -> bool:
        """Take the server's counts for this model (for the rest of the run); False when they
        would not make the prompt any shorter."""
        if getattr(model, "window", None) is None:
            return False
        old_limit, old_ratio = self._server_windows.get(model.profile_name, (None, 1.0))
        ratio = old_ratio
        if exc.prompt_tokens:
            ours = sum(map(window.message_tokens, request["messages"])) + window.fixed_tokens(
                request["tools"], request["response_format"])
            ratio = max(old_ratio, min(exc.prompt_tokens / max(ours, 1) * SERVER_COUNT_MARGIN,
                                       MAX_SERVER_RATIO))
        limit = min(filter(None, (old_limit, exc.limit_tokens)), default=None)
        if ratio <= old_ratio and limit == old_limit:
            return False
        self._server_windows[model.profile_name] = (limit, ratio)
        return True

    @staticmethod
    def _record_fit(step: Step, trimmed: dict[str, Any] | None,
                    server: ContextTooLong | None = None) -> None:
        # The step's input is the request dict itself, so it already holds the new messages.
        if server is not None:
            trimmed = {**(trimmed or {}), "server_prompt_tokens": server.prompt_tokens,
                       "server_context_tokens": server.limit_tokens}
        if trimmed:
            step.meta["trimmed"] = trimmed
        else:
            step.meta.pop("trimmed", None)

    async def _refused_llm(self, model: ChatModel, request: dict[str, Any],
                           exc: window.PromptTooLong, *, role: str, parent: int | None) -> None:
        """A prompt that cannot fit is not sent; the step says so, with the sizes."""
        budget = exc.budget
        await self.emit(Step(
            kind="llm", role=role, name=model.profile_name, parent=parent, input=request,
            output={"error": str(exc), "kind": exc.kind}, text=str(exc), status="error",
            duration_ms=0.0, meta={"refused": {
                "estimated_tokens": exc.estimated, "budget": budget.prompt,
                "context_tokens": budget.context_tokens, "reserve": budget.reserve}}))

    def elapsed_ms(self) -> float:
        return (time.monotonic() - self._started) * 1000


def _without(value: Any, forms: set[str], mark: str) -> Any:
    """`value` (any JSON) with every occurrence of `forms` in its strings replaced by `mark`;
    the same object where none was."""
    if isinstance(value, str):
        out = value
        for form in sorted(forms, key=len, reverse=True):
            out = out.replace(form, mark)
        return value if out == value else out
    if isinstance(value, dict):
        new = {k: _without(v, forms, mark) for k, v in value.items()}
        return value if all(new[k] is value[k] for k in value) else new
    if isinstance(value, list):
        items = [_without(v, forms, mark) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value
