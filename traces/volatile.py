"""What differs between any two runs of one program, and so is no difference (pure): ids a
server, a framework or the tracer made up (UUIDs, `call_…`, `chatcmpl-…`, run, trace and span
ids), memory addresses in printed objects (`<… object at 0x7f…>`), timestamps and durations.
`stable(value)` is the value with each such stretch replaced by a placeholder, for comparing;
what is shown stays as it was recorded."""

from __future__ import annotations

import re
from typing import Any

# Keys whose values are timings everywhere (a framework's step timing, a response's creation).
TIME_KEYS = frozenset({"latency_ms", "ttft_ms", "duration_ms", "duration", "elapsed",
                       "elapsed_ms", "start_time", "end_time", "timestamp", "created",
                       "created_at", "time_ns", "started_at", "finished_at"})
_PATTERNS = (
    ("<uuid>", r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"),
    ("<address>", r"\b0x[0-9a-fA-F]{6,16}\b"),
    # generated ids: OpenAI's, Anthropic's, and "run-…" / "trace_…" of tracers (at least
    # 6 characters after the prefix: a scripted "call_0" is data)
    ("<id>", r"\b(?:call|chatcmpl|cmpl|resp|msg|run|toolu|fc|req|span|trace|evt|asst|thread"
             r"|batch|file)[-_](?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{6,}"),
    ("<time>", r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"),
    ("<time>", r"\b1[5-9]\d{8}(?:\.\d+)?\b|\b1[5-9]\d{11}(?:\d{3}){0,2}\b"),  # epoch s/ms/us/ns
    ("<duration>", r"\b(?:duration|elapsed|latency|took)\b[\s=:'\"]*\d+(?:\.\d+)?"
                   r"(?:\s?(?:ms|s|µs|us|ns)\b)?"),
    ("<hex-id>", r"\b(?=[0-9]*[a-f])[0-9a-f]{32}\b|\b(?=[0-9]*[a-f])[0-9a-f]{16}\b"),
)
_VOLATILE = re.compile("|".join(f"(?P<p{i}>{p})" for i, (_, p) in enumerate(_PATTERNS)))
_NAMES = {f"p{i}": name for i, (name, _) in enumerate(_PATTERNS)}
MAX_DEPTH = 50


def stable_text(text: str) -> str:
    return _VOLATILE.sub(lambda m: _NAMES[m.lastgroup or ""], text)


def stable(value: Any, depth: int = 0) -> Any:
    """`value` with generated ids, addresses, timestamps and durations replaced (strings),
    and timing keys left out (mappings)."""
    if isinstance(value, str):
        return stable_text(value)
    if depth > MAX_DEPTH:
        return value
    if isinstance(value, dict):
        return {k: stable(v, depth + 1) for k, v in value.items() if k not in TIME_KEYS}
    if isinstance(value, list | tuple):
        return [stable(v, depth + 1) for v in value]
    return value
