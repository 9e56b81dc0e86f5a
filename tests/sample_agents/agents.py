"""Agents declared in code, as a developer writes them next to their own code. They run on
the "Scripted" model profile, which the tests point at the scripted OpenAI-compatible server."""

from __future__ import annotations

from dataclasses import dataclass

from agentlab.code_agents import agent
from agentlab.tools.builtin.weather import get_weather
from agentlab.tools.decorator import tool

FUNCTION_CALLING = {"mode": "function_calling"}


@tool
def packing_tip(city: str) -> str:
    """What to pack for a city."""
    return f"Take an umbrella to {city}."


@agent(paradigm="react", tools=[get_weather, packing_tip], model="Scripted", memory=2,
       max_steps=8, params=FUNCTION_CALLING)
def travel_advisor(question: str) -> str:
    """You advise travellers. Check the weather before recommending anything."""


@dataclass
class Trip:
    city: str
    days: int
    highlights: list[str]


@agent(model="Scripted", params=FUNCTION_CALLING, retries=1, name="Trip planner",
       template="Plan {days} days in {city}.")
def plan_trip(city: str, days: int = 3) -> Trip:
    """You plan short trips."""
