"""Rows several test modules build the same way (plain functions; fixtures are in fixtures.py)."""

from __future__ import annotations

from agentlab.models import Agent, ModelProfile


def scripted_profile(base_url: str) -> ModelProfile:
    """A model profile on the scripted OpenAI-compatible server, with prices to sum up."""
    return ModelProfile.objects.create(name="Scripted", base_url=base_url, model="scripted-model",
                                       retries=0, price_in_per_m=1, price_out_per_m=2)


def make_agents(profile: ModelProfile, n: int) -> list[Agent]:
    """`n` function-calling ReAct agents named "Agent 0", "Agent 1", … on `profile`."""
    made = []
    for i in range(n):
        agent = Agent(name=f"Agent {i}", paradigm="react", model_profile=profile,
                      params={"mode": "function_calling"})
        agent.full_clean()
        agent.save()
        made.append(agent)
    return made
