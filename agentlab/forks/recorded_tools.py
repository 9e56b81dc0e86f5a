"""RecordedExecutor: tool results served from a recorded run, live when the record has none
(pure; the tool-side twin of agentlab.llm.replay).

Calls are matched on (tool name, normalised arguments) among the next few pending recorded
calls, so parallel calls made in another order still find theirs. A call the record does not
hold runs live through the real executor: after a fork's step, or once the agent went another way.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentlab.runtime.context import Approval, deny_all
from agentlab.tools.executor import ToolExecutor, ToolResult
from traces.schema import Step, normalise_args

WINDOW = 8
Approver = Callable[[Step], Awaitable[Approval]]


@dataclass(frozen=True)
class RecordedTool:
    seq: int  # the source run's step
    name: str
    arguments: Any
    result: dict[str, Any]  # ToolResult.to_dict() shape


@dataclass(frozen=True)
class RecordedApproval:
    seq: int
    name: str
    arguments: Any
    decision: dict[str, Any]  # the approval step's output: approved, arguments, reason


@dataclass(frozen=True)
class ToolOutcome:
    source_seq: int
    edited: bool = False


def call_key(name: str, arguments: Any) -> str:
    return f"{name} {normalise_args(arguments)}"


def edited_result(result: dict[str, Any], observation: str) -> dict[str, Any]:
    """A recorded result with the observation the user wrote (an "Error: …" stays an error)."""
    ok = not observation.lstrip().startswith("Error:")
    return {**result, "ok": ok, "output": observation, "observation": observation,
            "error": None if ok else observation, "error_type": None if ok else "edited",
            "truncated": False}


class ToolRecording:
    """The recorded tool calls (and approvals) of one source run, shared by its executors.

    `fork_at=k` serves only steps <= k; `edited_observation` replaces step k's observation."""

    def __init__(self, calls: Sequence[RecordedTool], *, fork_at: int | None = None,
                 edited_observation: str | None = None,
                 approvals: Sequence[RecordedApproval] = (), window: int = WINDOW) -> None:
        keep = [c for c in sorted(calls, key=lambda c: c.seq)
                if fork_at is None or c.seq <= fork_at]
        self.pending = keep
        self.approvals = [a for a in approvals if fork_at is None or a.seq <= fork_at]
        self.fork_at = fork_at
        self.edited_observation = edited_observation
        self.window = window
        self.served: list[int] = []
        self.live_calls = 0
        self._outcomes: dict[str, deque[ToolOutcome]] = defaultdict(deque)
        # Results reserved by a recorded approval, by call key, served to that call only.
        self._reserved: dict[str, deque[RecordedTool]] = defaultdict(deque)

    def _find(self, name: str, arguments: Any) -> int | None:
        key = call_key(name, arguments)
        for i, call in enumerate(self.pending[:self.window]):
            if call_key(call.name, call.arguments) == key:
                return i
        return None

    def take(self, name: str, arguments: Any) -> ToolResult | None:
        """The recorded result of this call, or None: run it live. A result a recorded
        approval reserved for this call is served first."""
        key = call_key(name, arguments)
        held = self._reserved.get(key)
        if held:
            call = held.popleft()
        else:
            i = self._find(name, arguments)
            if i is None:
                return None
            call = self.pending.pop(i)
        self.served.append(call.seq)
        edited = self.edited_observation is not None and call.seq == self.fork_at
        result = edited_result(call.result, self.edited_observation) if edited else call.result
        self._outcomes[key].append(ToolOutcome(call.seq, edited))
        known = ToolResult.__dataclass_fields__
        return ToolResult(**{k: v for k, v in result.items() if k in known})

    def claim(self, name: str, arguments: Any) -> ToolOutcome | None:
        """Which recorded step served this call (each served call is claimed once)."""
        queue = self._outcomes.get(call_key(name, arguments))
        return queue.popleft() if queue else None

    def recorded_decision(self, step: Step) -> Approval | None:
        """The recorded decision for a call that will be served from the record (so it acts on
        nothing), or None: the call would run live, and only a person may approve that.

        A decision covers exactly one served call: an approval reserves the recorded result it
        is for, so two identical calls (parallel, before either is served) never both take
        approvals for one result, leaving the second to run live on the record's say-so."""
        key = call_key(step.name, step.input)
        for i, recorded in enumerate(self.approvals):
            if call_key(recorded.name, recorded.arguments) != key:
                continue
            d = recorded.decision
            runs = d.get("arguments") or step.input
            found = self._find(step.name, runs)
            if found is None:
                return None
            if d.get("approved"):
                self._reserved[call_key(step.name, runs)].append(self.pending.pop(found))
            del self.approvals[i]
            return Approval(bool(d.get("approved")), arguments=d.get("arguments"),
                            reason=str(d.get("reason") or ""))
        return None

    def approver(self, live: Approver = deny_all,
                 own: Callable[[Step], Step] | None = None) -> Approver:
        """The run's approver: the record's decision for a served call, else `live` (the
        person watching the run, through its RunControl; nobody: denied). `own` gives the
        runtime's own step for the one it shows (redacted): the record is matched on the
        arguments the call will really run with."""
        async def approve(step: Step) -> Approval:
            decision = self.recorded_decision(own(step) if own is not None else step)
            return decision if decision is not None else await live(step)
        return approve


class RecordedExecutor(ToolExecutor):
    """A ToolExecutor (same tools, policies, permissions) that serves recorded results first."""

    def __init__(self, inner: ToolExecutor, recording: ToolRecording) -> None:
        super().__init__(inner.tools, inner.policies, user_groups=inner.user_groups,
                         is_superuser=inner.is_superuser)
        self.inner = inner
        self.recording = recording

    async def run(self, name: str, arguments: dict[str, Any] | str | None, *,
                  timeout_s: float | None = None) -> ToolResult:
        # A tool the agent no longer has (or this user may not use) is not served either.
        recorded = self.recording.take(name, arguments) if name in self.names else None
        if recorded is not None:
            return recorded
        self.recording.live_calls += 1
        return await self.inner.run(name, arguments, timeout_s=timeout_s)
