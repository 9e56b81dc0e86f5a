"""PLACEHOLDER (replaced by branch proto at merge)."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass
class Wait:
    seconds: int
    why: str
    message: str


class _Limiter:
    @contextlib.contextmanager
    def request(self, key: int) -> Iterator[Wait | None]:
        yield None

    def spans(self, key: int, count: int) -> Wait | None:
        return None


LIMITER = _Limiter()
