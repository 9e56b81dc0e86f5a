"""An open trace's spans and their live steps, held in this process between its requests, so
that the whole read at its end neither reads the spans back from the database nor derives
their steps again (agentlab/receiver/whole.py): at 10,000 spans that was most of its cost.

Only what committed is added (`transaction.on_commit`), and a trace's spans are taken only
when they are exactly the ones stored: as many as its row counts (`ReceivedTrace.spans`; a
span id is stored once). Anything else — spans another process took, a process restarted, a
trace dropped to keep the bound — reads them back as before, so this is only ever a shortcut.
Bounded: at most MAX_SPANS spans in all; past it the traces least recently added to go first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from django.db import transaction

from traces.otel.decode import Span
from traces.schema import Step as StepRecord

# About 7 MB per 1,000 spans of the bench's agent (their attributes, parsed inputs and
# steps): 20,000 spans (a 10,000-span trace twice over) is ~150 MB at most, whatever the
# number of open traces.
MAX_SPANS = 20_000


@dataclass
class Held:
    """One trace's stored spans by seq (the order the whole read takes them in), and the
    steps made of them by span id."""

    spans: dict[int, Span] = field(default_factory=dict)
    steps: dict[str, StepRecord] = field(default_factory=dict)

    def ordered(self) -> list[Span]:
        return [self.spans[seq] for seq in sorted(self.spans)]


_HELD: OrderedDict[int, Held] = OrderedDict()  # ReceivedTrace pk -> its spans
_LOCK = threading.Lock()  # the writer thread, and tests that call the store directly
_count = 0


def add_on_commit(trace_pk: int, taken: list[tuple[int, Span, StepRecord]]) -> None:
    """Hold these (seq, span, step) of the trace once the transaction commits."""
    if taken:
        transaction.on_commit(lambda: _add(trace_pk, taken))


def _add(trace_pk: int, taken: list[tuple[int, Span, StepRecord]]) -> None:
    global _count
    with _LOCK:
        held = _HELD.pop(trace_pk, None) or Held()
        for seq, span, step in taken:
            if seq not in held.spans:
                _count += 1
            held.spans[seq] = span
            held.steps[span.span_id] = step
        _HELD[trace_pk] = held
        while _count > MAX_SPANS and _HELD:
            _count -= len(_HELD.popitem(last=False)[1].spans)


def take(trace_pk: int, stored: int) -> Held | None:
    """The trace's held spans, dropped from here, when they are all `stored` of them."""
    global _count
    with _LOCK:
        held = _HELD.pop(trace_pk, None)
        if held is not None:
            _count -= len(held.spans)
    return held if held is not None and len(held.spans) == stored else None


def drop(trace_pk: int) -> None:
    take(trace_pk, -1)


def clear() -> None:
    """Hold nothing (tests)."""
    global _count
    with _LOCK:
        _HELD.clear()
        _count = 0


def spans_held() -> int:
    return _count
