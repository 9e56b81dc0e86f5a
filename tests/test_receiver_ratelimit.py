"""A flood from one sender waits its turn and the others go on (agentlab/receiver/ratelimit.py):
the spans-a-second bucket, requests in flight, the buckets kept, the process's decode slots."""

from __future__ import annotations

import pytest

from agentlab.receiver.ratelimit import DecodeGate, RateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def limiter(clock: Clock, **overrides: float) -> RateLimiter:
    options = {"spans_per_s": 100, "burst": 500, "max_in_flight": 4, **overrides}
    return RateLimiter(clock=clock, **options)


def send(limits: RateLimiter, key: str, spans: int) -> int | None:
    """One request of `spans` spans as the view makes it: admitted, charged, released."""
    wait = limits.admit(key)
    if wait is None:
        limits.spend(key, spans)
        limits.release(key)
    return wait


def test_a_burst_goes_through_then_the_sender_waits_until_its_bucket_refills():
    clock = Clock()
    limits = limiter(clock)
    assert [send(limits, "a", 100) for _ in range(5)] == [None] * 5
    assert send(limits, "a", 100) == 1  # empty: one span comes back in 1/100 s, said as 1 s
    clock.now += 0.02
    assert send(limits, "a", 100) is None


def test_a_sender_idle_for_long_gets_the_burst_again_not_more():
    clock = Clock()
    limits = limiter(clock)
    assert send(limits, "a", 500) is None
    clock.now += 3600
    assert [send(limits, "a", 100) for _ in range(6)] == [None] * 5 + [1]


def test_a_batch_larger_than_the_burst_goes_through_and_is_paid_back_before_the_next():
    clock = Clock()
    limits = limiter(clock)
    assert send(limits, "a", 1_500) is None  # 1,000 spans over the burst of 500
    assert limits.admit("a") == 11  # 1,001 spans at 100 a second
    clock.now += 10
    assert limits.admit("a") == 1
    clock.now += 0.02
    assert limits.admit("a") is None


def test_another_sender_is_not_held_back_by_one_that_floods():
    clock = Clock()
    limits = limiter(clock)
    while send(limits, "flood", 512) is None:
        pass
    assert [send(limits, "flood", 512) for _ in range(100)] == [1] * 100  # refusals cost nothing
    assert [send(limits, "other", 100) for _ in range(5)] == [None] * 5


def test_requests_in_flight_are_capped_per_sender():
    limits = limiter(Clock(), spans_per_s=0)  # no rate: only the cap
    assert [limits.admit("a") for _ in range(4)] == [None] * 4
    assert limits.admit("a") == 1
    assert limits.admit("b") is None
    limits.release("a")
    assert limits.admit("a") is None


def test_zero_means_no_limit():
    limits = limiter(Clock(), spans_per_s=0, max_in_flight=0)
    assert all(limits.admit("a") is None for _ in range(1_000))
    limits.spend("a", 10**9)
    assert limits.admit("a") is None


def test_a_flood_of_distinct_senders_keeps_a_bounded_number_of_buckets():
    clock = Clock()
    limits = limiter(clock, max_keys=100, max_in_flight=1)
    assert limits.admit("busy") is None  # in flight: its bucket stays
    send(limits, "owes", 5_000)  # the least recently used idle bucket: dropped first
    for i in range(10_000):
        send(limits, f"token-{i}", 1)
        assert limits.keys() <= 100
    assert limits.admit("busy") == 1  # still counted in flight
    assert limits.admit("owes") is None  # a new bucket: its debt went with the old one


def test_decoding_is_capped_per_process_and_one_sender_leaves_a_slot_to_the_others():
    gate = DecodeGate(2)
    assert gate.admit("flood") is None
    assert gate.admit("flood") == 1  # all but one slot at most
    assert gate.admit("other") is None
    assert gate.admit("third") == 1  # the process is full: 503 + Retry-After
    gate.release("other")
    assert gate.admit("third") is None
    gate.release("flood")
    gate.release("third")
    assert [gate.admit("flood"), gate.admit("other"), gate.admit("third")] == [None, None, 1]


@pytest.mark.parametrize(("limit", "admitted"), [(0, 50), (1, 1), (4, 3)])
def test_decode_slots_one_sender_may_hold(limit, admitted):
    gate = DecodeGate(limit)
    answers = [gate.admit("a") for _ in range(50)]
    assert answers.count(None) == admitted
