"""Which runs a sampling rate keeps: decided by the run's id alone, so a rule keeps the same
runs in any process, on any day, in any queue; and a 5 % sample is part of the 10 % one
(pure)."""

from __future__ import annotations

import hashlib

BUCKETS = 10_000  # a rate is kept to 0.01 %


def bucket(run_id: int) -> int:
    """The run's place in 0..BUCKETS-1: a hash, so neighbouring ids land far apart."""
    digest = hashlib.sha256(f"run {run_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % BUCKETS


def sampled(run_id: int, percent: float) -> bool:
    """Is the run among the `percent` % a rule keeps? 100 keeps every run, 0 none."""
    if percent >= 100:
        return True
    return bucket(run_id) < round(percent * BUCKETS / 100)
