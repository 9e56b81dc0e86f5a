"""What a gateway call records off the agent's wait (docs/GATEWAY.md "Performance").

A step the run's control will not hold and no guardrail reads goes without its `running`
version unless it is still open after SLOW_S (`Later.watch`: the run's page shows a call in
flight only if it is slow enough to watch). An llm step's finished version waits until its
reply has been sent (`Later.hold_back`, then `after_sent`, called by the response's closers)
and is recorded before the run's status in any case (`Later.flush`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from traces.schema import Step

log = logging.getLogger(__name__)
SLOW_S = 1.0  # a call open this long gets its `running` version: the page shows it in flight


class Later:
    def __init__(self, run_id: int, show_running: Callable[[Step], None],
                 record: Callable[[Step], Awaitable[object]]) -> None:
        self.run_id = run_id
        self.show_running, self.record = show_running, record
        self._slow: dict[int, asyncio.TimerHandle] = {}  # seq -> its `running` version, later
        self._unsent: dict[int, Step] = {}  # finished steps whose reply is being sent
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop = asyncio.get_running_loop()

    def watch(self, step: Step) -> None:
        """`step` gets its `running` version if it is still open after SLOW_S."""
        self._slow[step.seq] = self._loop.call_later(SLOW_S, self._still_open, step)

    def _still_open(self, step: Step) -> None:
        if self._slow.pop(step.seq, None) is not None:
            self.show_running(step)

    def settled(self, step: Step) -> None:
        """`step` has a version of its own now: no `running` one after it."""
        if (timer := self._slow.pop(step.seq, None)) is not None:
            timer.cancel()

    def hold_back(self, step: Step) -> None:
        """Record the finished `step` once its reply is out (`after_sent`)."""
        self.settled(step)
        self._unsent[step.seq] = step

    def after_sent(self) -> None:
        """The reply went out (or the client left): record what waited for it, in a task of
        its own (called from a response's closers: Django's handler may close in a thread)."""
        try:
            here = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            here = False
        if here:  # handed over in the next loop turn, before anything else goes on
            self._soon()
        elif not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._soon)

    def _soon(self) -> None:
        if self._unsent:
            task = self._loop.create_task(self.flush())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def flush(self) -> None:
        """Record every finished step still waiting for its reply to go out."""
        while self._unsent:
            step = self._unsent.pop(next(iter(self._unsent)))
            try:
                await self.record(step)
            except Exception:  # the recorder keeps what was lost for the run's status
                log.exception("gateway run %s: recording step %s failed", self.run_id,
                              step.seq)

    async def drain(self) -> None:
        """`flush`, and wait for the recordings already under way (a step popped by a flush
        task of its own may still be on its way to the recorder): before the run's status."""
        await self.flush()
        current = asyncio.current_task()
        if others := [task for task in self._tasks if task is not current]:
            await asyncio.gather(*others, return_exceptions=True)
