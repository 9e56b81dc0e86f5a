"""The runs this process holds, and how to reach each: one registry per process (`REGISTRY`).

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

All of it is touched from the serving loop's thread only (fanout.publish also from a command
outside any loop, which then owns the process).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

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


PARTS = ("task", "context", "control", "lane", "outgoing", "sender")


class RunRegistry:
    """run id -> RunEntry, for the runs this process holds."""

    def __init__(self) -> None:
        self._entries: dict[int, RunEntry] = {}

    def entry(self, run_id: int) -> RunEntry | None:
        return self._entries.get(run_id)

    def hold(self, run_id: int) -> RunEntry:
        """The run's entry, added if the process held nothing of it yet."""
        entry = self._entries.get(run_id)
        if entry is None:
            entry = self._entries[run_id] = RunEntry(run_id)
        return entry

    def put(self, run_id: int, **parts: Any) -> RunEntry:
        """Set parts of the run's entry (task=, context=, ...), adding the entry if needed."""
        if unknown := set(parts) - set(PARTS):
            raise TypeError(f"a run entry has no part {sorted(unknown)}")
        entry = self.hold(run_id)
        for name, value in parts.items():
            setattr(entry, name, value)
        return entry

    def clear(self, run_id: int, part: str, only: Any = None) -> None:
        """Forget a part of the run (only if it is still `only`, when given: a newer one
        stays); the entry goes once nothing of it is left."""
        entry = self._entries.get(run_id)
        if entry is None:
            return
        if only is None or getattr(entry, part) is only:
            setattr(entry, part, None)
        self.release(run_id)

    def release(self, run_id: int) -> None:
        """Drop the run's entry if nothing of it is left (after a part was taken off it)."""
        entry = self._entries.get(run_id)
        if entry is not None and entry.empty:
            del self._entries[run_id]

    def task(self, run_id: int) -> asyncio.Task[Any] | None:
        """The run's task, if it was launched in this process and is not done."""
        entry = self._entries.get(run_id)
        return entry.task if entry is not None else None

    def held(self) -> list[int]:
        """The runs executing in this process, in the order they were first held."""
        return [run_id for run_id, entry in self._entries.items() if entry.executing]

    def entries(self) -> list[RunEntry]:
        """Every entry: the runs executing here and those only watched or still publishing."""
        return list(self._entries.values())

    def sending(self) -> list[int]:
        """The runs with events still on their way to other processes."""
        return [run_id for run_id, entry in self._entries.items()
                if entry.outgoing is not None or entry.sender is not None]

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._entries


REGISTRY = RunRegistry()
