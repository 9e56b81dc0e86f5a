"""Agents declared in Python: `@agent` turns a typed function into an agent of the lab.

    from agentlab.code_agents import agent

    @agent(paradigm="react", tools=[get_weather], model="embedded", memory=20)
    def travel_advisor(question: str) -> str:
        \"\"\"You advise travellers. Check the weather before recommending anything.\"\"\"

    travel_advisor("Is Paris nice?")               # sync; await travel_advisor.acall(...)
    travel_advisor.session("alice")("And Rome?")   # remembers alice's last 20 turns

The docstring is the system message, the parameters fill the user message, the return type is
enforced; every call is a recorded run. README "Agents in Python" says it all.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from agentlab.code_agents.calls import (
    AgentCallError,
    AgentOutputError,
    AgentResult,
    AgentRunFailed,
    Caller,
    RunningLoopError,
)
from agentlab.code_agents.declaration import EMBEDDED, Declaration, declare, register

__all__ = ["EMBEDDED", "AgentCallError", "AgentOutputError", "AgentResult", "AgentRunFailed",
           "CodeAgent", "RunningLoopError", "agent"]


class CodeAgent(Caller):
    """A declared agent: call it like the function it was written as."""

    def __init__(self, declaration: Declaration) -> None:
        super().__init__(declaration)
        if declaration.fn is not None:
            functools.update_wrapper(self, declaration.fn)

    @property
    def name(self) -> str:
        return self.declaration.name

    def __repr__(self) -> str:
        return f"<agent {self.name!r} defined at {self.declaration.code_ref}>"


def agent(fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Declare an agent, bare (`@agent`) or with options (`@agent(paradigm="react", …)`):
    name, paradigm, system, description, template, tools, model, memory, retries, params,
    demo_question and the limits max_steps, max_llm_calls, total_timeout_s,
    tool_timeout_s, token_budget."""

    def build(f: Callable[..., Any]) -> CodeAgent:
        declaration = declare(f, **options)
        register(declaration)
        return CodeAgent(declaration)

    return build(fn) if fn is not None else build
