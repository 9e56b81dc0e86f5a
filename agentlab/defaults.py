"""The default data a fresh install gets: the embedded profile and the default agents."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from agentlab import default_prompts
from agentlab.evals.demo import demo_defaults
from agentlab.models import Agent, ModelProfile, Tool
from agentlab.paradigms.registry import get_paradigm
from agentlab.profiles import EMBEDDED_PROFILE
from agentlab.tool_rows import sync_tools

# Read-only demo tools every default agent gets (writers need approval; add them per agent).
DEMO_TOOLS = [
    "calculator", "current_time", "get_weather", "get_air_quality", "search",
    "list_tables", "describe_table", "sql_query", "query_order", "check_security",
    "check_performance",
]

REACT_DEMO = "What is the weather in Paris right now, and is the air quality good?"
# What each default agent offers: what its demo question needs, no more (a 135M model reads the
# whole tool list on every turn and picks among it worse the longer it is).
LOOKUPS = ["get_weather", "get_air_quality", "calculator"]
# The approvals demo: a look-up, then two calls that need a person's yes (Tool.needs_approval).
APPROVAL_TOOLS = ["query_order", "update_delivery_date", "send_email"]
APPROVAL_DEMO = ("The customer of order SO-1001 is away: move its delivery date to 2030-01-15 "
                 "(reason: customer away) and e-mail the customer that it moved.")
# A demo question finishes on a 2-core machine in under a minute: a few turns, then the answer
# from what was found (runtime/answer.py).
QUICK = {"total_timeout_s": 60, "max_llm_calls": 8}


@dataclass(frozen=True)
class DefaultAgent:
    name: str
    paradigm: str
    params: dict[str, Any] = field(default_factory=dict)
    description: str = ""  # blank: the paradigm class's own
    demo_question: str = ""  # blank: the paradigm class's own
    limits: dict[str, Any] = field(default_factory=dict)  # Agent limit fields
    tools: list[str] = field(default_factory=lambda: list(DEMO_TOOLS))
    system_prompt: str = ""


DEFAULT_AGENTS = [
    DefaultAgent("ReAct (function calling)", "react",
                 {"mode": "function_calling", "max_iterations": 4,
                  "first_tool_choice": "required",
                  "few_shot": default_prompts.function_calling()},
                 "OpenAI-style tool calls; several calls in one reply run concurrently.",
                 REACT_DEMO, QUICK, LOOKUPS, default_prompts.FUNCTION_CALLING),
    DefaultAgent("ReAct (text)", "react",
                 {"mode": "text", "max_iterations": 4, "first_tool_choice": "required",
                  "few_shot": default_prompts.text_mode()},
                 "The paper's Thought / Action / Action Input / Observation format, parsed "
                 "tolerantly.", REACT_DEMO, QUICK, LOOKUPS),
    DefaultAgent("ReAct (JSON)", "react",
                 {"mode": "json", "max_iterations": 4, "first_tool_choice": "required",
                  "few_shot": default_prompts.json_mode()},
                 "Structured output constrained to a JSON schema: what makes tiny local models "
                 "usable.", REACT_DEMO, QUICK, LOOKUPS),
    DefaultAgent("ReAct + rule reflector", "react",
                 {"mode": "json", "reflector": "rule", "max_iterations": 4,
                  "first_tool_choice": "required", "few_shot": default_prompts.json_mode()},
                 "ReAct whose every observation is reviewed by the rule-based reflector, which "
                 "re-plans.", REACT_DEMO, QUICK, LOOKUPS),
    # The one default agent with tools that change things: each call of update_delivery_date
    # or send_email waits on the run's page for Approve / Deny (time spent waiting does not
    # count towards its time limit).
    DefaultAgent("ReAct with approvals", "react",
                 {"mode": "json", "max_iterations": 5, "first_tool_choice": "required",
                  "few_shot": default_prompts.json_mode()},
                 "Changes an order and e-mails its customer: update_delivery_date and "
                 "send_email wait for your approval (Approve / Deny on the run's page).",
                 APPROVAL_DEMO, {"total_timeout_s": 90, "max_llm_calls": 8}, APPROVAL_TOOLS),
    DefaultAgent("Plan-and-Execute", "plan_execute",
                 {"few_shot": default_prompts.planner(), "replan": False,
                  "executor_mode": "function_calling", "executor_first_tool_choice": "required",
                  "executor_few_shot": default_prompts.function_calling()},
                 limits={"total_timeout_s": 90}, tools=LOOKUPS),
    DefaultAgent("Reflexion", "reflexion", limits={"total_timeout_s": 90},
                 tools=["calculator"]),
    # More than its demo needs: the demo suite's SQL and code questions too. Its examples are
    # shown by likeness to the task (the five nearest), so they do not crowd a weather prompt.
    DefaultAgent("ReWOO", "rewoo", {"few_shot": default_prompts.rewoo_planner(),
                                     "few_shot_order": "similar_last", "few_shot_keep": 5},
                 limits=QUICK, tools=[*LOOKUPS, "sql_query", "check_security"]),
    DefaultAgent("Self-Ask", "self_ask", {"few_shot": default_prompts.self_ask(),
                                          "min_follow_ups": 2},
                 limits=QUICK, tools=["search"]),
    # A tree search makes many calls: ~29 LLM calls and ~55 steps for 4 iterations of 3.
    DefaultAgent("LATS", "lats", limits={"max_llm_calls": 40, "max_steps": 80,
                                         "total_timeout_s": 300},
                 tools=["list_tables", "describe_table", "sql_query"]),
    DefaultAgent("Multi-Agent debate", "multi_agent", {"mode": "debate"},
                 limits={"max_llm_calls": 40, "max_steps": 100, "total_timeout_s": 300},
                 tools=LOOKUPS),
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
            # Greedy: the same question mostly makes the same run, so a replay, a fork and an
            # experiment compare like with like (LATS samples candidates at its own).
            "temperature": 0.0,
            "max_tokens": 512,
            "timeout_s": 120,
            "retries": 1,
        },
    )
    if made:
        created.append(f"model profile '{profile.name}'")
    if new_tools := sync_tools():
        created.append(f"{len(new_tools)} tools")
    for spec in DEFAULT_AGENTS:
        cls = get_paradigm(spec.paradigm)
        agent, made = Agent.objects.get_or_create(
            name=spec.name,
            defaults={"paradigm": spec.paradigm, "params": spec.params, "model_profile": profile,
                      "description": spec.description or getattr(cls, "description", ""),
                      "demo_question": spec.demo_question or getattr(cls, "demo_question", ""),
                      "system_prompt": spec.system_prompt, **spec.limits},
        )
        if made:
            agent.full_clean()  # fills in the paradigm's parameter defaults
            agent.save()
            agent.tools.set(Tool.objects.filter(name__in=spec.tools))
            created.append(f"agent '{spec.name}'")
    created += demo_defaults()
    return created
