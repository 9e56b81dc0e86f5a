"""A small agent as people write one with the openai SDK, for `manage.py attach` tests: it
knows nothing of Agent Lab; the SDK reads OPENAI_BASE_URL and OPENAI_API_KEY from its
environment. `python weather_agent.py "question" [exit status]`; the tool's answer comes from
$WEATHER (default "sunny, 21 °C"), the model's name from $AGENT_MODEL (default "scripted");
$AGENT_PAUSE_S makes it wait after its tool, as a slow agent would."""

from __future__ import annotations

import json
import os
import sys
import time

import openai

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather now in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]


def get_weather(city: str) -> str:
    return os.environ.get("WEATHER", "sunny, 21 °C")


def main(question: str) -> str:
    client = openai.OpenAI(max_retries=0, timeout=30)
    messages: list[dict] = [{"role": "system", "content": "You answer weather questions."},
                            {"role": "user", "content": question}]
    for _ in range(4):
        reply = client.chat.completions.create(
            model=os.environ.get("AGENT_MODEL", "scripted"), messages=messages, tools=TOOLS)
        message = reply.choices[0].message.model_dump(exclude_none=True)
        messages.append(message)
        if not message.get("tool_calls"):
            return message.get("content") or ""
        for call in message["tool_calls"]:
            args = json.loads(call["function"]["arguments"])
            print(f"tool get_weather({args.get('city')!r})", flush=True)
            messages.append({"role": "tool", "tool_call_id": call["id"],
                             "content": get_weather(**args)})
            if pause := float(os.environ.get("AGENT_PAUSE_S", "0")):  # Ctrl-C tests
                print("thinking…", flush=True)
                time.sleep(pause)
    return "no answer"


if __name__ == "__main__":
    print(f"QUESTION: {sys.argv[1]}", flush=True)
    print(f"ANSWER: {main(sys.argv[1])}", flush=True)
    sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
