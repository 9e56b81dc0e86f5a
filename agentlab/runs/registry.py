"""The runs this process holds, and how to reach each: one registry per process (`REGISTRY`);
and its experiments the same way (`EXPERIMENTS`).

For each run this process knows of there is one `RunEntry`, holding what the process has of it:
its asyncio task and RunContext while it executes here (agentlab.runs.execution), its RunControl
(agentlab.runs.control), its lane while recorded events wait to be published
(agentlab.runs.recorder), the sockets of this process that watch it and its queue of events on
their way to other processes (agentlab.runs.fanout). Everything else asks the registry; no module
keeps its own map of run ids. The types of the higher layers' parts are Protocols or `Any` here:
traces never imports agentlab.

The registry is the one place entries are added (`hold`, `put`) and removed: a part is
forgotten with `clear` (or a subscriber with `release` after taking it off the list), and the
entry goes as soon as nothing of it is left: its task done, no context, no control, no lane,
no subscriber, nothing waiting to go out. So a process that ran and watched a thousand runs
holds nothing of them once they are over.

Held by the process but not per run, so not here: the one writer thread
(agentlab.runs.writer.WRITER) and the display's render cache (traces.display.renderer, keyed by a
step's content, bounded). A worker process that hosts runs for others (issue 20's engine) registers
them the same way.

An experiment running in this process (agentlab.evals.runner) has an `ExperimentEntry` in
`EXPERIMENTS`, the same kind of registry keyed by experiment id: its task where this process
started it, its runner.Control while its pairs run here (cancel_experiment reaches its runs
through it). It goes, like a run's, once neither is left. (On the engine's workers nothing of an
experiment lives in any process: agentlab/evals/on_workers.py.)

All of it is touched from the serving loop's thread only (fanout.publish also from a command
outside any loop, which then owns the process; runner.cancel_experiment reads an experiment's
control from any thread, and hands the cancel to its loop).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

Subscriber = Callable[[dict[str, Any]], None]


class Cancellable(Protocol):
    """A run's context (agentlab.runtime.context.RunContext): what cancel needs of it."""

    def cancel(self) -> None: ...


@dataclass(eq=False)
class RunEntry:
    """What this process holds of one run; a part is None (or empty) when it has none of it."""

    run_id: int
    task: asyncio.Task[Any] | None = None  # executing here (execution.launch)
    context: Cancellable | None = None  # its RunContext while the run loop executes it
    control: Any = None  # its runs.control.RunControl
    lane: Any = None  # agentlab.runs.recorder's lane, while events wait to be published
    subscribers: list[Subscriber] = field(default_factory=list)  # this process's watchers
    outgoing: asyncio.Queue[dict[str, Any]] | None = None  # events on their way out
    sender: asyncio.Task[None] | None = None  # the task draining `outgoing`

    # What `put` may set (the subscribers are a list: fanout appends and removes them).
    PARTS: ClassVar[tuple[str, ...]] = ("task", "context", "control", "lane", "outgoing",
                                        "sender")

    @property
    def executing(self) -> bool:
        """The run executes in this process (its task is going, or its loop runs here)."""
        return (self.task is not None and not self.task.done()) or self.context is not None

    @property
    def watched(self) -> bool:
        return bool(self.subscribers)

    @property
    def empty(self) -> bool:
        return (self.task is None and self.context is None and self.control is None
                and self.lane is None and not self.subscribers and self.outgoing is None
                and self.sender is None)


@dataclass(eq=False)
class ExperimentEntry:
    """What this process holds of one experiment (agentlab.evals.runner) while it runs here."""

    experiment_id: int
    task: asyncio.Task[Any] | None = None  # started here (runner.start_experiment)
    control: Any = None  # its runner.Control while its pairs run here (cancel reaches them)
    PARTS: ClassVar[tuple[str, ...]] = ("task", "control")

    @property
    def empty(self) -> bool:
        return self.task is None and self.control is None


class Entry(Protocol):
    """What a registry holds per id: its parts, and whether any is left."""

    PARTS: ClassVar[tuple[str, ...]]

    @property
    def empty(self) -> bool: ...


class Registry[E: Entry]:
    """id -> entry of one kind (`kind`, made from the id), for what this process holds of
    each: added by `hold` and `put`, gone once nothing of it is left (`clear`, `release`)."""

    def __init__(self, kind: type[E]) -> None:
        self._kind = kind
        self._entries: dict[int, E] = {}

    def entry(self, key: int) -> E | None:
        return self._entries.get(key)

    def hold(self, key: int) -> E:
        """The entry, added if the process held nothing of it yet."""
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = self._kind(key)
        return entry

    def put(self, key: int, **parts: Any) -> E:
        """Set parts of the entry (task=, context=, ...), adding the entry if needed."""
        if unknown := set(parts) - set(self._kind.PARTS):
            raise TypeError(f"a {self._kind.__name__} has no part {sorted(unknown)}")
        entry = self.hold(key)
        for name, value in parts.items():
            setattr(entry, name, value)
        return entry

    def clear(self, key: int, part: str, only: Any = None) -> None:
        """Forget a part (only if it is still `only`, when given: a newer one stays); the
        entry goes once nothing of it is left."""
        entry = self._entries.get(key)
        if entry is None:
            return
        if only is None or getattr(entry, part) is only:
            setattr(entry, part, None)
        self.release(key)

    def release(self, key: int) -> None:
        """Drop the entry if nothing of it is left (after a part was taken off it)."""
        entry = self._entries.get(key)
        if entry is not None and entry.empty:
            del self._entries[key]

    def task(self, key: int) -> asyncio.Task[Any] | None:
        """Its task, if it was started in this process (None once done and forgotten)."""
        entry = self._entries.get(key)
        return getattr(entry, "task", None)

    def entries(self) -> list[E]:
        return list(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries


class RunRegistry(Registry[RunEntry]):
    """run id -> RunEntry, for the runs this process holds."""

    def __init__(self) -> None:
        super().__init__(RunEntry)

    def held(self) -> list[int]:
        """The runs executing in this process, in the order they were first held."""
        return [run_id for run_id, entry in self._entries.items() if entry.executing]

    def entries(self) -> list[RunEntry]:
        """Every entry: the runs executing here and those only watched or still publishing."""
        return super().entries()

    def sending(self) -> list[int]:
        """The runs with events still on their way to other processes."""
        return [run_id for run_id, entry in self._entries.items()
                if entry.outgoing is not None or entry.sender is not None]


REGISTRY = RunRegistry()
EXPERIMENTS: Registry[ExperimentEntry] = Registry(ExperimentEntry)
