"""The default data a fresh install gets: the embedded profile and the default agents."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from agentlab.evals.demo import demo_defaults
from agentlab.models import Agent, ModelProfile, Tool
from agentlab.paradigms.registry import get_paradigm
from agentlab.tool_rows import sync_tools

EMBEDDED_PROFILE = "Local SmolLM2"

# Read-only demo tools every default agent gets (writers need approval; add them per agent).
DEMO_TOOLS = [
    "calculator", "current_time", "get_weather", "get_air_quality", "search",
    "list_tables", "describe_table", "sql_query", "query_order", "check_security",
    "check_performance",
]

REACT_DEMO = "What is the weather in Paris right now, and is the air quality good?"


@dataclass(frozen=True)
class DefaultAgent:
    name: str
    paradigm: str
    params: dict[str, Any] = field(default_factory=dict)
    description: str = ""  # blank: the paradigm class's own
    demo_question: str = ""  # blank: the paradigm class's own
    limits: dict[str, Any] = field(default_factory=dict)  # Agent limit fields


DEFAULT_AGENTS = [
    DefaultAgent("ReAct (function calling)", "react", {"mode": "function_calling"},
                 "OpenAI-style tool calls; several calls in one reply run concurrently.",
                 REACT_DEMO),
    DefaultAgent("ReAct (text)", "react", {"mode": "text"},
                 "The paper's Thought / Action / Action Input / Observation format, parsed "
                 "tolerantly.", REACT_DEMO),
    DefaultAgent("ReAct (JSON)", "react", {"mode": "json"},
                 "Structured output constrained to a JSON schema: what makes tiny local models "
                 "usable.", REACT_DEMO),
    DefaultAgent("ReAct + rule reflector", "react", {"mode": "json", "reflector": "rule"},
                 "ReAct whose every observation is reviewed by the rule-based reflector, which "
                 "re-plans.", REACT_DEMO),
    DefaultAgent("Plan-and-Execute", "plan_execute"),
    DefaultAgent("Reflexion", "reflexion"),
    DefaultAgent("ReWOO", "rewoo"),
    DefaultAgent("Self-Ask", "self_ask"),
    # A tree search makes many calls: ~29 LLM calls and ~55 steps for 4 iterations of 3.
    DefaultAgent("LATS", "lats", limits={"max_llm_calls": 40, "max_steps": 80,
                                         "total_timeout_s": 300}),
    DefaultAgent("Multi-Agent debate", "multi_agent", {"mode": "debate"},
                 limits={"max_llm_calls": 40, "max_steps": 100, "total_timeout_s": 300}),
]


@transaction.atomic
def load_defaults() -> list[str]:
    """Create what is missing (never overwrite a user's edits); returns what was created."""
    created: list[str] = []
    profile, made = ModelProfile.objects.get_or_create(
        name=EMBEDDED_PROFILE,
        defaults={
            "base_url": "",
            "model": "",  # blank = whatever the embedded server serves
            "temperature": 0.2,
            "max_tokens": 512,
            "timeout_s": 120,
            "retries": 1,
        },
    )
    if made:
        created.append(f"model profile '{profile.name}'")
    if new_tools := sync_tools():
        created.append(f"{len(new_tools)} tools")
    tools = list(Tool.objects.filter(name__in=DEMO_TOOLS))
    for spec in DEFAULT_AGENTS:
        cls = get_paradigm(spec.paradigm)
        agent, made = Agent.objects.get_or_create(
            name=spec.name,
            defaults={"paradigm": spec.paradigm, "params": spec.params, "model_profile": profile,
                      "description": spec.description or getattr(cls, "description", ""),
                      "demo_question": spec.demo_question or getattr(cls, "demo_question", ""),
                      **spec.limits},
        )
        if made:
            agent.full_clean()  # fills in the paradigm's parameter defaults
            agent.save()
            agent.tools.set(tools)
            created.append(f"agent '{spec.name}'")
    created += demo_defaults()
    return created
