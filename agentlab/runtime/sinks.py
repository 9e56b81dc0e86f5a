"""Where steps go: the StepSink protocol, an in-memory sink for tests and the CLI, and a tee
that sends every event to several sinks."""

from __future__ import annotations

import copy
from typing import Any, Protocol

from traces.schema import Step


class StepSink(Protocol):
    async def step(self, step: Step) -> None:
        """Record a step; called twice for one seq (running, then finished): upsert by seq."""

    async def token(self, seq: int, delta: str) -> None:
        """A streamed piece of the text of the `llm` step `seq`."""

    async def status(self, status: str, detail: dict[str, Any]) -> None:
        """The run's status; the last call's detail has "answer", "error" and "totals"."""

    # Optional: `async def durable(self) -> None`, "everything handed over so far is stored",
    # which the runtime awaits before a tool call (agentlab.runs.recorder.Recorder has it): see
    # `durable` below.


async def durable(sink: Any) -> None:
    """Wait until `sink` has stored everything handed over so far, if it stores anything."""
    if (wait := getattr(sink, "durable", None)) is not None:
        await wait()


class TeeSink:
    """Send every event to several sinks, in order (the recorder first: persist, then show)."""

    def __init__(self, *sinks: Any) -> None:
        self.sinks = sinks

    async def step(self, step: Step) -> None:
        for sink in self.sinks:
            await sink.step(step)

    async def token(self, seq: int, delta: str) -> None:
        for sink in self.sinks:
            await sink.token(seq, delta)

    async def status(self, status: str, detail: dict[str, Any]) -> None:
        for sink in self.sinks:
            await sink.status(status, detail)

    async def durable(self) -> None:
        for sink in self.sinks:
            await durable(sink)


class MemorySink:
    """Keeps everything in memory: `steps` (latest version per seq), `events`, `tokens`."""

    def __init__(self) -> None:
        self.events: list[Step] = []  # every call to step(), as copies, in order
        self.by_seq: dict[int, Step] = {}
        self.tokens: list[tuple[int, str]] = []
        self.statuses: list[tuple[str, dict[str, Any]]] = []

    async def step(self, step: Step) -> None:
        snapshot = copy.deepcopy(step)  # the runtime mutates the step it emitted
        self.events.append(snapshot)
        self.by_seq[step.seq] = snapshot

    async def token(self, seq: int, delta: str) -> None:
        self.tokens.append((seq, delta))

    async def status(self, status: str, detail: dict[str, Any]) -> None:
        self.statuses.append((status, copy.deepcopy(detail)))

    @property
    def steps(self) -> list[Step]:
        return [self.by_seq[seq] for seq in sorted(self.by_seq)]

    def kinds(self) -> list[str]:
        return [s.kind for s in self.steps]

    def of_kind(self, kind: str) -> list[Step]:
        return [s for s in self.steps if s.kind == kind]

    def text_of(self, seq: int) -> str:
        return "".join(delta for s, delta in self.tokens if s == seq)
