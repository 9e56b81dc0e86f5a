"""A user's regular expression, made safe: it lives in agentlab/guardrails/user_regex.py (the
guardrails' deny-list uses it too, below the runtime); this name stays for its older users."""

from __future__ import annotations

from agentlab.guardrails.user_regex import (
    MATCH_TIMEOUT_S,
    MAX_PATTERN_CHARS,
    MAX_REPEAT_EXPANSION,
    UnsafePattern,
    compile_pattern,
    repeat_expansion,
    search,
)

__all__ = ["MATCH_TIMEOUT_S", "MAX_PATTERN_CHARS", "MAX_REPEAT_EXPANSION", "UnsafePattern",
           "compile_pattern", "repeat_expansion", "search"]
