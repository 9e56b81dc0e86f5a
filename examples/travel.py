"""Agents in Python (README "Agents in Python"), on the embedded model:

    .venv/bin/python -m examples.travel "Is Paris nice right now?"

Run `scripts/run` (or `manage.py setup`) once before, so the database and the embedded
profile exist. Each call is a recorded run: the script prints its trace's address.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentlab.settings")
django.setup()

from agentlab import default_prompts  # noqa: E402  (after django.setup())
from agentlab.code_agents import AgentCallError, agent  # noqa: E402
from agentlab.tools.builtin.weather import get_weather  # noqa: E402

# A 135M model follows an exchange it is shown, not one it is told about: the default agents'
# few-shot turns, and a first reply that must be a tool call.
SMALL_MODEL = {"mode": "function_calling", "first_tool_choice": "required",
               "few_shot": default_prompts.function_calling()}


@agent(paradigm="react", tools=[get_weather], model="embedded", memory=10, max_llm_calls=4,
       total_timeout_s=90, params=SMALL_MODEL)
def travel_advisor(question: str) -> str:
    """You advise travellers. Call get_weather for the city first, then answer in one short
    sentence."""


@dataclass
class Forecast:
    city: str
    temperature_c: float
    condition: str


def answered_as_json() -> list[dict]:
    """The first shown exchange (Rome's weather), its answer written as the JSON asked for."""
    turns = default_prompts.function_calling()[:4]
    turns[-1] = {"role": "assistant",
                 "content": '{"city": "Rome", "temperature_c": 18, "condition": "sunny"}'}
    return turns


@agent(paradigm="react", tools=[get_weather], model="embedded", max_llm_calls=4,
       total_timeout_s=90, params={**SMALL_MODEL, "few_shot": answered_as_json()},
       template="What is the weather in {city}?")
def forecast(city: str) -> Forecast:
    """Call get_weather for the city, then answer with its city, temperature and condition."""


def main(question: str) -> None:
    from agentlab.llm.local_server import LocalModelServer
    from agentlab.management.commandutil import embedded_answers

    server = None
    if not embedded_answers():  # `scripts/run` is not running: start one for this script
        print("Starting the embedded model…", flush=True)
        server = LocalModelServer(port=0)
        server.start()
    try:
        result = travel_advisor.session("example").run(question)
        print(f"travel_advisor: {result.value}   (trace: /runs/{result.run_id}/)")
        try:
            typed = forecast.run("Paris")
            print(f"forecast: {typed.value!r}   (trace: /runs/{typed.run_id}/)")
        except AgentCallError as exc:  # a 135M model does not always manage the JSON
            print(f"forecast: no Forecast: {exc} (runs {list(exc.run_ids)})")
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main(" ".join(sys.argv[1:]) or "Is Paris nice right now?")
