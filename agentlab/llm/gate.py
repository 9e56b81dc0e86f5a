"""Model gates: at most N requests to one endpoint at a time, the rest wait their turn in order.

llama.cpp's server (the embedded model) answers one request at a time; whatever else arrives
waits inside the server, on the caller's HTTP timeout and the run's clock, and two experiment
runs and a chat question then time each other out. A gate keeps those waits here instead,
first come first served (a chat question asked during an experiment goes between two of its
runs' calls, not after all of them), and tells whoever waits that it does: the runtime does not
charge that time against the run's limits and shows "waiting for the model"
(agentlab/runtime/context.py). A request is sent only when it holds its place, so the profile's
`timeout_s` measures the model's own time.

One gate per endpoint (base URL) and event loop, shared by every model of every run on it, as
transport.POOL shares clients; the limit is the caller's (`OpenAIChatModel(gate_limit=…)`, from
the settings: agentlab/profiles.py). A process's gates know nothing of another process's.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar

# Who hears that a request waits for its turn: called with how many requests are ahead of it
# (being answered or waiting before it), it returns the context the wait happens in.
QueueListener = Callable[[int], AbstractAsyncContextManager[None]]
_LISTENER: ContextVar[QueueListener | None] = ContextVar("agentlab_model_queue", default=None)


class Gate:
    """`limit` places; a request that finds none free waits in a FIFO queue."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.busy = 0  # places taken
        self._queue: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        return sum(not f.done() for f in self._queue)

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """Hold a place while the body runs (the request and its whole reply)."""
        if self.busy < self.limit and not self._queue:
            self.busy += 1
        else:
            await self._wait_turn()
        try:
            yield
        finally:
            self._release()

    async def _wait_turn(self) -> None:
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        ahead = self.busy + self.waiting
        self._queue.append(turn)
        listener = _LISTENER.get()
        try:
            if listener is None:
                await turn
            else:
                async with listener(ahead):
                    await turn
        except BaseException:
            if turn.done() and not turn.cancelled():
                self._release()  # the place was handed over as we left: hand it on
            else:
                turn.cancel()
                with contextlib.suppress(ValueError):
                    self._queue.remove(turn)
            raise

    def _release(self) -> None:
        while self._queue:
            turn = self._queue.popleft()
            if not turn.done():
                turn.set_result(None)  # the place goes straight to the next in line
                return
        self.busy -= 1


class Gates:
    """The gates of each event loop, by base URL (a loop's gates go when the loop is collected)."""

    def __init__(self) -> None:
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Gate]] = (
            weakref.WeakKeyDictionary())

    def get(self, base_url: str, limit: int) -> Gate:
        gates = self._loops.setdefault(asyncio.get_running_loop(), {})
        if (gate := gates.get(base_url)) is None:
            gate = gates[base_url] = Gate(limit)
        gate.limit = limit  # a changed setting counts from the next request
        return gate


GATES = Gates()


@contextlib.asynccontextmanager
async def through(base_url: str, limit: int) -> AsyncIterator[None]:
    """Send one request to `base_url` with at most `limit` at a time (0 or less: no limit)."""
    if limit <= 0:
        yield
        return
    async with GATES.get(base_url.rstrip("/"), limit).held():
        yield


@contextlib.contextmanager
def listening(listener: QueueListener | None) -> Iterator[None]:
    """While the body runs (in this task and those it starts), a wait for a model's turn is
    announced to `listener`."""
    token = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(token)
