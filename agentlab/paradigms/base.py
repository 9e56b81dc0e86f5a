"""The shared runtime of every paradigm (DESIGN.md "The runtime owns the loop").

The pieces live in small modules; import them from here:
limits (Limits, Totals, exceptions) · sinks (StepSink, MemorySink) · context (RunContext,
Approval) · registry (Paradigm, register_paradigm, get_paradigm, …) · runtime (execute).
"""

from __future__ import annotations

from agentlab.paradigms.context import Approval, RunContext, deny_all, normalise_args
from agentlab.paradigms.limits import (
    BudgetExceeded,
    IterationLimit,
    Limits,
    LoopDetected,
    RunCancelled,
    Totals,
)
from agentlab.paradigms.registry import (
    Paradigm,
    get_paradigm,
    paradigm_keys,
    register_paradigm,
    validate_params,
)
from agentlab.paradigms.runtime import RunOutcome, execute
from agentlab.paradigms.scopes import AgentSpec, Scope
from agentlab.paradigms.sinks import MemorySink, StepSink
from traces.schema import Step

__all__ = [
    "AgentSpec",
    "Approval",
    "BudgetExceeded",
    "IterationLimit",
    "Limits",
    "LoopDetected",
    "MemorySink",
    "Paradigm",
    "RunCancelled",
    "RunContext",
    "RunOutcome",
    "Scope",
    "Step",
    "StepSink",
    "Totals",
    "deny_all",
    "execute",
    "get_paradigm",
    "normalise_args",
    "paradigm_keys",
    "register_paradigm",
    "validate_params",
]
