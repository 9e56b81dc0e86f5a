"""ReplayModel: answer LLM requests from a recorded run, and say where a new run leaves it (pure).

A `Recording` holds the source run's `llm` steps (request + reply) and is shared by the replay
models of every role, so the recorded calls are consumed in the source's order whichever role
asks. Each request is hashed (messages, tools, tool_choice, response_format, stop) and matched
against the next few pending recorded calls — a few, not just the first, because paradigms that
call the model in parallel (ReWOO's workers, ReAct's parallel tools) may ask in another order.
The first request that matches none is a divergence: it is kept with the fields that differ and
the run goes live from there (or fails with a clear error when no live model is given).
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agentlab.llm.errors import LLMError
from agentlab.llm.types import (
    ChatModel,
    ChatResult,
    ContextWindow,
    TokenCallback,
    ToolCall,
    Usage,
)

HASHED_FIELDS = ("messages", "tools", "tool_choice", "response_format", "stop")
WINDOW = 8  # how many pending recorded calls a request may match (out-of-order parallel calls)

OutcomeKind = Literal["replayed", "edited", "diverged", "live"]


class ReplayMismatch(LLMError):
    """The recording has no reply for a request and there is no live model to ask."""

    kind = "replay_mismatch"


@dataclass(frozen=True)
class RecordedCall:
    seq: int  # the source run's step
    request: dict[str, Any]
    response: dict[str, Any]  # ChatResult.to_dict() shape


@dataclass(frozen=True)
class Divergence:
    source_seq: int | None  # the recorded step the request should have matched (None: no more)
    fields: tuple[str, ...]
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"source_seq": self.source_seq, "fields": list(self.fields),
                "detail": self.detail}


@dataclass(frozen=True)
class Outcome:
    """What happened to one request: served from the record (maybe edited), or sent live."""

    kind: OutcomeKind
    source_seq: int | None = None
    divergence: Divergence | None = None


def marks(outcome: Outcome) -> dict[str, Any]:
    """What a recorded llm step's meta says of where its reply came from: served from the
    record (maybe edited), or where the request left it. The same for Agent Lab's own replays
    (agentlab.forks.record) and the gateway's (agentlab.gateway.session)."""
    if outcome.kind in ("replayed", "edited"):
        return {"replayed": True, "source_seq": outcome.source_seq,
                **({"edited": True} if outcome.kind == "edited" else {})}
    if (d := outcome.divergence) is not None:
        return {"diverged_from": d.source_seq, "divergence": d.detail,
                "divergence_fields": list(d.fields)}
    return {}


def canonical(value: Any) -> str:
    """JSON with sorted keys: a recorded request (read back from the database) and a new one
    (tuples, ints as floats…) compare equal when they say the same."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str,
                      separators=(",", ":"))


def request_hash(request: Mapping[str, Any]) -> str:
    fields = {name: request.get(name) for name in HASHED_FIELDS}
    return hashlib.sha256(canonical(fields).encode()).hexdigest()


def differences(new: Mapping[str, Any], recorded: Mapping[str, Any]) -> Divergence | None:
    """The fields in which `new` differs from `recorded`, with a short readable detail."""
    fields = tuple(f for f in HASHED_FIELDS
                   if canonical(new.get(f)) != canonical(recorded.get(f)))
    if not fields:
        return None
    return Divergence(None, fields, _detail(fields[0], new, recorded))


def _detail(field: str, new: Mapping[str, Any], recorded: Mapping[str, Any]) -> str:
    if field != "messages":
        return f"{field} differs from the recorded request"
    ours, theirs = list(new.get("messages") or []), list(recorded.get("messages") or [])
    for i, (a, b) in enumerate(zip(ours, theirs, strict=False)):
        if canonical(a) != canonical(b):
            role = a.get("role", "?") if isinstance(a, Mapping) else "?"
            return f"message {i + 1} ({role}) differs from the recorded request"
    return f"the request has {len(ours)} messages, the recorded one {len(theirs)}"


def result_from_dict(data: Mapping[str, Any]) -> ChatResult:
    """A ChatResult from its to_dict() shape, tolerant of hand-edited replies: unknown keys are
    dropped, a tool call may give just `name` and `arguments`."""
    known = {f.name for f in dataclasses.fields(ChatResult)}
    fields = {k: v for k, v in data.items() if k in known}
    calls = []
    for i, raw in enumerate(data.get("tool_calls") or []):
        args = raw.get("arguments")
        raw_args = raw.get("raw_arguments")
        if raw_args is None:
            raw_args = json.dumps(args if args is not None else {})
        calls.append(ToolCall(id=raw.get("id") or f"call_{i}", name=str(raw.get("name", "")),
                              arguments=args if isinstance(args, dict) else None,
                              raw_arguments=raw_args, error=raw.get("error")))
    usage = data.get("usage") or {}
    fields.update(tool_calls=calls, usage=Usage(int(usage.get("prompt_tokens", 0)),
                                                int(usage.get("completion_tokens", 0))))
    fields["text"] = fields.get("text") or ""
    return ChatResult(**fields)


class Recording:
    """The recorded LLM calls of one source run, consumed by the replay models of all roles.

    `fork_at=k` serves only the calls of steps <= k (a fork: live after k); `edited_reply`
    replaces fields of step k's reply (the user's edit); `paid` keeps a served reply's cost (a
    run taken over re-reads its own calls, which it did pay for). `divergences`, `live_calls` and
    `unused` say how the new run followed the record; `claim` tells which request got what."""

    def __init__(self, calls: Sequence[RecordedCall | tuple[int, dict, dict]], *,
                 fork_at: int | None = None, edited_reply: Mapping[str, Any] | None = None,
                 window: int = WINDOW, paid: bool = False) -> None:
        entries = sorted((c if isinstance(c, RecordedCall) else RecordedCall(*c) for c in calls),
                         key=lambda c: c.seq)
        self.pending = [c for c in entries if fork_at is None or c.seq <= fork_at]
        self._hashes = {c.seq: request_hash(c.request) for c in self.pending}
        self.fork_at = fork_at
        self.edited_reply = dict(edited_reply) if edited_reply else None
        self.window = window
        self.paid = paid
        self.diverged = False
        self.divergences: list[Divergence] = []
        self.served: list[int] = []  # source seqs, in the order they were served
        self.live_calls = 0
        self._outcomes: dict[str, deque[Outcome]] = defaultdict(deque)

    @property
    def first_divergence(self) -> Divergence | None:
        return self.divergences[0] if self.divergences else None

    @property
    def unused(self) -> list[int]:
        """Recorded calls the new run never asked for (it ended sooner, or went another way)."""
        return [c.seq for c in self.pending]

    def take(self, request: Mapping[str, Any]) -> tuple[Outcome, ChatResult | None]:
        """The outcome for `request`, with the recorded reply when there is one to serve."""
        key = request_hash(request)
        outcome, result = self._match(request, key)
        self._outcomes[key].append(outcome)
        return outcome, result

    def claim(self, request: Mapping[str, Any]) -> Outcome | None:
        """The outcome of an earlier take() of this request (each is claimed once, in order)."""
        queue = self._outcomes.get(request_hash(request))
        return queue.popleft() if queue else None

    def _match(self, request: Mapping[str, Any], key: str) -> tuple[Outcome, ChatResult | None]:
        if self.diverged:
            return Outcome("live"), None
        for i, call in enumerate(self.pending[:self.window]):
            if self._hashes[call.seq] == key:
                del self.pending[i]
                self.served.append(call.seq)
                return self._serve(call)
        if self.pending:
            first = self.pending[0]
            found = differences(request, first.request)
            assert found is not None  # the hashes differ, so some field does
            return self._diverge(dataclasses.replace(found, source_seq=first.seq))
        if self.fork_at is None:  # a replay asked for more than the source ever did
            return self._diverge(Divergence(None, ("recording",),
                                            "the recorded run made no more LLM calls"))
        return Outcome("live"), None  # a fork past its step: live by design

    def _serve(self, call: RecordedCall) -> tuple[Outcome, ChatResult]:
        response = call.response
        edited = self.edited_reply is not None and call.seq == self.fork_at
        if edited:
            response = {**response, **self.edited_reply}
        # Nothing was paid for a served reply (unless it is this run's own, `paid`); its usage
        # stays, so token budgets act the same.
        result = result_from_dict(response)
        if not self.paid:
            result = dataclasses.replace(result, cost_usd=0.0)
        return Outcome("edited" if edited else "replayed", call.seq), result

    def _diverge(self, divergence: Divergence) -> tuple[Outcome, None]:
        self.diverged = True
        self.divergences.append(divergence)
        return Outcome("diverged", divergence.source_seq, divergence), None


class ReplayModel:
    """A ChatModel that answers from a Recording, then from `live` (the role's real model)."""

    def __init__(self, recorded: Recording | Sequence[RecordedCall | tuple[int, dict, dict]],
                 live: ChatModel | None = None, *, fork_at: int | None = None,
                 edited_reply: Mapping[str, Any] | None = None,
                 profile_name: str | None = None, window: ContextWindow | None = None) -> None:
        self.recording = recorded if isinstance(recorded, Recording) else Recording(
            recorded, fork_at=fork_at, edited_reply=edited_reply)
        self.live = live
        self.profile_name = profile_name or (live.profile_name if live else "replay")
        # The role's window, so a replayed prompt is fitted as the recorded one was.
        self.window = window or getattr(live, "window", None)

    async def chat(self, messages: list[dict[str, Any]], *, tools: list | None = None,
                   tool_choice: Any = None, response_format: dict | None = None,
                   stop: list[str] | None = None, temperature: float | None = None,
                   max_tokens: int | None = None,
                   on_token: TokenCallback | None = None) -> ChatResult:
        request = {"messages": messages, "tools": tools, "tool_choice": tool_choice,
                   "response_format": response_format, "stop": stop}
        outcome, result = self.recording.take(request)
        if result is not None:
            if on_token is not None and result.text:
                maybe = on_token(result.text)  # the live view shows a served reply at once
                if inspect.isawaitable(maybe):
                    await maybe
            return result
        if self.live is None:
            why = outcome.divergence.detail if outcome.divergence else "past the fork"
            where = f" (step {outcome.source_seq})" if outcome.source_seq else ""
            raise ReplayMismatch(f"the recording has no reply for this request{where}: {why}")
        self.recording.live_calls += 1
        return await self.live.chat(messages, tools=tools, tool_choice=tool_choice,
                                    response_format=response_format, stop=stop,
                                    temperature=temperature, max_tokens=max_tokens,
                                    on_token=on_token)


def replay_models(models: Mapping[str, ChatModel], recording: Recording, *,
                  live: bool = True) -> dict[str, ReplayModel]:
    """Each role's model wrapped over one shared recording (live = the role's own model)."""
    return {role: ReplayModel(recording, model if live else None,
                              profile_name=model.profile_name,
                              window=getattr(model, "window", None))
            for role, model in models.items()}
