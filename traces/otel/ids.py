"""Trace and span ids: stable for one run, distinct between installations.

An installation is its SECRET_KEY (every process of one deployment shares it already, for
sessions) or AGENTLAB_INSTALLATION_ID when set; the ids are an HMAC of the run id under it,
so run 1 of two installations never shares an id (Phoenix drops spans whose id it has seen)
and nothing about the key can be read back from an id.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from functools import cache
from typing import Any

from django.conf import settings


@cache
def _installation_key(explicit: str, secret: str) -> bytes:
    return hmac.new(secret.encode(), f"agentlab-otel:{explicit}".encode(), hashlib.sha256).digest()


def installation_key() -> bytes:
    return _installation_key(os.environ.get("AGENTLAB_INSTALLATION_ID", ""), settings.SECRET_KEY)


def installation_id() -> str:
    """A short public name of this installation (in every span's resource)."""
    return hashlib.sha256(installation_key()).hexdigest()[:12]


def _digest(text: str, key: bytes | None) -> bytes:
    return hmac.new(key or installation_key(), text.encode(), hashlib.sha256).digest()


def trace_id(run_id: Any, key: bytes | None = None) -> int:
    """128 bits, never 0 (an invalid id in OTLP)."""
    return int.from_bytes(_digest(f"run:{run_id}", key)[:16]) or 1


def span_id(run_id: Any, seq: int, key: bytes | None = None) -> int:
    """64 bits, never 0; seq 0 is the run's root span."""
    return int.from_bytes(_digest(f"run:{run_id}:{seq}", key)[:8]) or 1


def hex_trace(value: int) -> str:
    return f"{value:032x}"


def hex_span(value: int) -> str:
    return f"{value:016x}"
