"""Fair admission of OTLP requests: a flood from one sender waits, the others go on (pure).

Process-local and thread-safe (the view admits on the event loop, decoding runs in threads).
Each answers None (go on, and `release` when done) or the whole seconds to wait (Retry-After).

- `RateLimiter`: per key (a token, or a user), a bucket of spans refilled at `spans_per_s` up
  to `burst`, and at most `max_in_flight` requests at once. A request's spans are known only
  once it is decoded, so a request is admitted while its key's bucket holds a span and its
  spans are charged afterwards (`spend`); the bucket may go below zero, and the key's next
  request waits until it is paid back. A batch larger than the burst thus still goes through.
  At most `max_keys` buckets are kept: past that the least recently used idle ones are dropped.
- `DecodeGate`: at most `limit` decodes at once in the process, so a flood never queues
  threads; one key holds at most `limit - 1` of them, so another sender always finds one.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from itertools import islice

# What a refused request waits when nothing better is known (a slot frees in well under that).
BUSY_WAIT_S = 1


@dataclass(slots=True)
class _Bucket:
    spans: float  # may be below zero: spans charged beyond the burst, to be paid back
    stamp: float  # when `spans` was last refilled
    in_flight: int = 0


class RateLimiter:
    def __init__(self, *, spans_per_s: float, burst: int, max_in_flight: int,
                 max_keys: int = 10_000, clock: Callable[[], float] = time.monotonic) -> None:
        """`spans_per_s` 0: no rate; `max_in_flight` 0: no cap on requests at once."""
        self.spans_per_s = spans_per_s
        self.burst = burst
        self.max_in_flight = max_in_flight
        self.max_keys = max_keys
        self.clock = clock
        self._buckets: OrderedDict[Hashable, _Bucket] = OrderedDict()
        self._lock = threading.Lock()

    def admit(self, key: Hashable) -> int | None:
        """None: go on (the request counts as in flight until `release`); else seconds to wait."""
        with self._lock:
            bucket = self._refilled(key)
            if self.max_in_flight and bucket.in_flight >= self.max_in_flight:
                return BUSY_WAIT_S
            if self.spans_per_s and bucket.spans < 1:
                return max(1, math.ceil((1 - bucket.spans) / self.spans_per_s))
            bucket.in_flight += 1
            return None

    def spend(self, key: Hashable, spans: int) -> None:
        """Charge an admitted request's spans to its key."""
        with self._lock:
            self._refilled(key).spans -= spans

    def release(self, key: Hashable) -> None:
        """An admitted request is done."""
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is not None and bucket.in_flight > 0:
                bucket.in_flight -= 1

    def keys(self) -> int:
        """How many keys have a bucket kept."""
        with self._lock:
            return len(self._buckets)

    def _refilled(self, key: Hashable) -> _Bucket:
        now = self.clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            self._drop_idle()
            bucket = self._buckets[key] = _Bucket(spans=self.burst, stamp=now)
        else:
            self._buckets.move_to_end(key)
            bucket.spans = min(self.burst,
                               bucket.spans + (now - bucket.stamp) * self.spans_per_s)
            bucket.stamp = now
        return bucket

    def _drop_idle(self) -> None:
        """Make room for one more key: the least recently used idle buckets go. One with
        requests in flight stays (those are bounded by the server's connections)."""
        excess = len(self._buckets) + 1 - self.max_keys
        if excess > 0:
            idle = (key for key, bucket in self._buckets.items() if bucket.in_flight == 0)
            for key in list(islice(idle, excess)):
                del self._buckets[key]


class DecodeGate:
    def __init__(self, limit: int) -> None:
        """`limit` decodes at once in this process; 0: no limit."""
        self.limit = limit
        self.per_key = max(1, limit - 1)
        self._held: dict[Hashable, int] = {}
        self._total = 0
        self._lock = threading.Lock()

    def admit(self, key: Hashable) -> int | None:
        """None: decode now (then `release`); else seconds to wait (answer 503)."""
        with self._lock:
            held = self._held.get(key, 0)
            if self.limit and (self._total >= self.limit or held >= self.per_key):
                return BUSY_WAIT_S
            self._held[key] = held + 1
            self._total += 1
            return None

    def release(self, key: Hashable) -> None:
        with self._lock:
            held = self._held.get(key, 0)
            if held <= 0:
                return
            if held == 1:
                del self._held[key]
            else:
                self._held[key] = held - 1
            self._total -= 1
