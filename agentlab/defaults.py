"""The default data a fresh install gets: the embedded profile and the default agents."""

from __future__ import annotations

from django.db import transaction

from agentlab.models import Agent, ModelProfile, Tool
from agentlab.tool_rows import sync_tools

EMBEDDED_PROFILE = "Local SmolLM2"

# Read-only demo tools every default agent gets (writers need approval; add them per agent).
DEMO_TOOLS = [
    "calculator", "current_time", "get_weather", "get_air_quality", "search",
    "list_tables", "describe_table", "sql_query", "query_order",
]

REACT_AGENTS = [
    ("ReAct (function calling)", {"mode": "function_calling"},
     "OpenAI-style tool calls; several calls in one reply run concurrently."),
    ("ReAct (text)", {"mode": "text"},
     "The paper's Thought / Action / Action Input / Observation format, parsed tolerantly."),
    ("ReAct (JSON)", {"mode": "json"},
     "Structured output constrained to a JSON schema: what makes tiny local models usable."),
    ("ReAct + rule reflector", {"mode": "json", "reflector": "rule"},
     "ReAct whose every observation is reviewed by the rule-based reflector, which re-plans."),
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
    for name, params, description in REACT_AGENTS:
        agent, made = Agent.objects.get_or_create(
            name=name,
            defaults={"paradigm": "react", "params": params, "description": description,
                      "model_profile": profile},
        )
        if made:
            agent.full_clean()  # fills in the paradigm's parameter defaults
            agent.save()
            agent.tools.set(tools)
            created.append(f"agent '{name}'")
    return created
