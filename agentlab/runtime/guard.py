"""A run's guardrails as the runtime applies them (pure; agentlab/guardrails/ has the checks).

RunContext.emit hands every step to `RunGuard.step` before the sink sees it: the sink (rows,
sockets, live OpenTelemetry export) gets a redacted copy, the runtime keeps its own step (the
request it sends is the step's input). A tool's result is redacted before the model reads it
(`tool_result`), so the model cannot repeat what it never saw. Streamed tokens go out a whole
line at a time, redacted, holding back what may still become a secret (`TokenLines`); none
when an output judge will read the answer. The question was checked when the run was created
(agentlab.runs.snapshot); its decisions are recorded when the run starts (`question`), and the
input judges are asked then, before the paradigm sees it. Output judges read the answer.

A value acted on once is not reported again in every later prompt that quotes it: the guard
remembers (in memory only) which values each guardrail has reported, and what each string it
scanned gave (`Memo`), so a later prompt's old messages are not scanned again.

A user-written deny-list pattern never runs on the event loop: with one among the checks, the
async methods (`astep`, `atool_result`, `adetail`, `TokenLines.afeed`, `answer`) scan in a
thread, and each call gives each pattern one time budget (MATCH_TIMEOUT_S) for everything it
scans, not one per string."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentlab.guardrails.checks import (
    Budget,
    Check,
    GuardrailBlocked,
    Hit,
    Memo,
    scan_text,
    scrub,
)
from agentlab.guardrails.decisions import decide, judged
from agentlab.guardrails.judge import judge
from traces.schema import Step

if TYPE_CHECKING:
    from agentlab.llm.types import ChatModel
    from agentlab.tools.executor import ToolResult

SUBJECT_FIELDS = ("text", "output")
OTHER_FIELDS = ("input", "meta")
BLOCKABLE = ("llm", "tool")  # what a block stops the run at: a model's reply, a tool's result


class RunGuard:
    def __init__(self, checks: Sequence[Check], *, judges: Mapping[str, ChatModel] | None = None,
                 question: Mapping[str, Any] | None = None) -> None:
        self.output = [c for c in checks if c.stage == "output" and c.kind != "judge"]
        self.input_judges = [c for c in checks if c.stage == "input" and c.kind == "judge"]
        self.output_judges = [c for c in checks if c.stage == "output" and c.kind == "judge"]
        self.judges = dict(judges or {})
        self.decided = dict(question or {})  # what the input checks decided at creation
        self._reported: set[tuple[str, str]] = set()  # (guardrail, value): in memory only
        self.memo = Memo()
        self.off_loop = any(c.kind == "regex" for c in self.output)

    async def _call(self, work: Callable[..., Any], *args: Any) -> Any:
        """`work(*args)`: in a thread when a user's pattern is among the checks."""
        if self.off_loop:
            return await asyncio.to_thread(work, *args)
        return work(*args)

    async def astep(self, step: Step) -> tuple[Step, list[dict[str, Any]]]:
        return await self._call(self.step, step)

    async def atool_result(self, result: ToolResult) -> tuple[ToolResult, list[dict[str, Any]]]:
        return await self._call(self.tool_result, result)

    async def adetail(self, detail: dict[str, Any]) -> dict[str, Any]:
        return await self._call(self.detail, detail)

    def _new(self, hits: list[Hit]) -> list[Hit]:
        fresh = [h for h in hits if (h.check.name, h.found) not in self._reported]
        self._reported.update((h.check.name, h.found) for h in hits)
        return fresh

    def step(self, step: Step) -> tuple[Step, list[dict[str, Any]]]:
        """What the sink may see of `step`, and the decisions not reported before."""
        if not self.output:
            return step, []
        # scrub() copies only what it changes: a step with nothing to report is not copied
        # (the sink copies what it keeps anyway).
        fields, hits, budget = {}, [], Budget()
        for name in (*SUBJECT_FIELDS, *OTHER_FIELDS):
            fields[name], found = scrub(getattr(step, name), self.output,
                                        subject=name in SUBJECT_FIELDS and step.kind != "guardrail",
                                        path=name, budget=budget, memo=self.memo)
            hits += found
        if not hits:
            return step, []
        shown = dataclasses.replace(step, **fields)
        if step.kind == "guardrail":  # our own record: redacted, never decided about again
            return shown, []
        may_block = step.kind in BLOCKABLE and step.status != "running"
        return shown, decide(self._new(hits), may_block=may_block)

    def tool_result(self, result: ToolResult) -> tuple[ToolResult, list[dict[str, Any]]]:
        """The tool's result as the model and the trace get it, and the decisions."""
        if not self.output:
            return result, []
        budget = Budget()
        observation, hits = scan_text(result.observation, self.output, subject=True,
                                      path="output.observation", budget=budget, memo=self.memo)
        output, more = scrub(result.output, self.output, subject=True, path="output.output",
                             budget=budget, memo=self.memo)
        error, most = scan_text(result.error or "", self.output, subject=True,
                                path="output.error", budget=budget, memo=self.memo)
        hits += more + most
        if not hits:
            return result, []
        result = dataclasses.replace(result, observation=observation, output=output,
                                     error=error or result.error)
        return result, decide(self._new(hits), may_block=True)

    def detail(self, detail: dict[str, Any]) -> dict[str, Any]:
        """A status's answer and error, redacted (their decisions were the final step's)."""
        if not self.output:
            return detail
        clean, budget = dict(detail), Budget()
        for key in ("answer", "error"):
            if isinstance(clean.get(key), str):
                clean[key], _hits = scan_text(clean[key], self.output, subject=True,
                                              budget=budget, memo=self.memo)
        return clean

    def tokens(self) -> TokenLines | None:
        if not self.output and not self.output_judges:
            return None
        return TokenLines(self.output, hold=bool(self.output_judges), off_loop=self.off_loop)

    async def question(self, question: str) -> list[dict[str, Any]]:
        """The input decisions: those made at creation, then each input judge's."""
        decisions = list(self.decided.get("decisions") or [])
        if not self.decided.get("blocked"):
            decisions += [await self._judge(c, question) for c in self.input_judges]
        return decisions

    async def answer(self, answer: str) -> list[dict[str, Any]]:
        """Each output judge's decision on the answer, as redacted (what the guardrails take
        out of a run never leaves it, not even to a judge)."""
        shown = (await self._call(lambda: scan_text(answer, self.output, subject=True,
                                                    memo=self.memo)))[0]
        return [await self._judge(c, shown) for c in self.output_judges]

    async def _judge(self, check: Check, text: str) -> dict[str, Any]:
        model = self.judges.get(check.name)
        if model is None:
            return judged(check, violation=True, reason="its judge model is not configured",
                          model="")
        verdict = await judge(model, check.pattern, text)
        decision = judged(check, violation=verdict.violation, reason=verdict.reason,
                          model=verdict.model, error=verdict.error)
        return decision | {"tokens_in": verdict.tokens_in, "tokens_out": verdict.tokens_out}


def blocked(decisions: Sequence[dict[str, Any]]) -> GuardrailBlocked | None:
    """The first block among `decisions`, as the exception to raise."""
    for d in decisions:
        if d["action"] == "block":
            return GuardrailBlocked(d["guardrail"], d["message"])
    return None


PEM_BEGIN, PEM_END = "-----BEGIN ", "-----END "


class TokenLines:
    """Streamed text released a whole line at a time, redacted: a span (a card number, an
    e-mail address) never straddles two deltas a browser sees. What might still become a
    secret is held back: a PEM block (`-----BEGIN …`) until its END line, and nothing past a
    redacting length limit is streamed at all. With `hold` (an output judge will read the
    answer) nothing is streamed. The rest comes with the finished step, redacted whole."""

    def __init__(self, checks: Sequence[Check], *, hold: bool = False,
                 off_loop: bool = False) -> None:
        self.checks, self.pending, self.hold, self.off_loop = checks, "", hold, off_loop
        limits = [c.limit for c in checks
                  if c.kind == "max_length" and c.action != "flag" and c.limit is not None]
        self.limit = min(limits) if limits else None
        self.released = 0  # characters of the reply released so far
        self.stopped = hold

    async def afeed(self, delta: str) -> str:
        """`feed`, in a thread when a user's pattern is among the checks."""
        if self.off_loop:
            return await asyncio.to_thread(self.feed, delta)
        return self.feed(delta)

    def feed(self, delta: str) -> str:
        if self.stopped:
            return ""
        self.pending += delta
        cut = self.pending.rfind("\n") + 1
        if not cut:
            return ""
        begin = self.pending.rfind(PEM_BEGIN, 0, cut)
        if begin >= 0 and self.pending.find(PEM_END, begin, cut) < 0:
            cut = self.pending.rfind("\n", 0, begin) + 1  # from the BEGIN line on: held
        if self.limit is not None and self.released + cut > self.limit:
            # Only whole lines within the limit; nothing after it is streamed.
            cut = min(cut, self.pending.rfind("\n", 0, max(self.limit - self.released, 0)) + 1)
            self.stopped = True
        if not cut:
            return ""
        lines, self.pending = self.pending[:cut], self.pending[cut:]
        self.released += cut
        return scan_text(lines, self.checks, subject=True)[0]
