"""The embedded model server's memory soak (issue 38, `manage.py bench_llm --soak N`): requests
shaped as the default agents send them (function calling with tools, ReAct JSON's schema, text
ReAct's and ReWOO's grammars, plain chat, streamed or not), runs of one to six turns whose
prompts grow by an observation each turn, prompts from ~60 to ~2,000 tokens, and the
server's resident memory (VmRSS) sampled as it goes."""

from __future__ import annotations

import json
import random
import urllib.request
from collections.abc import Iterator
from typing import Any

from agentlab.llm import chatml, grammars

TOOLS = [
    {"name": "get_weather", "description": "Current weather for a city.",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                    "required": ["city"]}},
    {"name": "calculator", "description": "Evaluate an arithmetic expression.",
     "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
                    "required": ["expression"]}},
    {"name": "get_air_quality", "description": "The air quality index (AQI) of a city.",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                     "units": {"enum": ["aqi", "pm25"]}},
                    "required": ["city"]}},
    {"name": "search_orders", "description": "Orders of a customer, newest first.",
     "parameters": {"type": "object", "properties": {"customer": {"type": "string"},
                                                     "limit": {"type": "integer"}},
                    "required": ["customer"]}},
]
REACT_JSON_SCHEMA = {"type": "object", "properties": {
    "thought": {"type": "string"}, "action": {"type": "string"},
    "action_input": {"type": "object"}, "final_answer": {"type": "string"}},
    "required": ["thought"]}
CITIES = ["Paris", "Beijing", "London", "Sydney", "São Paulo", "Lagos", "Oslo", "Lima",
          "Tokyo", "Cairo", "Denver", "Mumbai"]
WORDS = ["the", "order", "shipped", "temperature", "humidity", "wind", "customer", "delivery",
         "index", "reading", "station", "north", "report", "value", "result", "pending", "total",
         "ratio", "forecast", "sunny", "cloudy", "rain"]
PROMPT_CHARS = 9000  # a run ends before its prompt passes this (~3,000 tokens of JSON)
KINDS = ("tools", "tools_stream", "react_json", "react_text", "rewoo", "chat", "chat_stream")


def _openai_tool(tool: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": tool}


def _observation(rng: random.Random) -> str:
    """A tool's result: a JSON object of 2 to 40 fields (about 20 to 800 characters)."""
    fields = rng.choice([2, 5, 12, 25, 40])
    return json.dumps({f"{rng.choice(WORDS)}_{i}": rng.choice(
        [rng.randint(0, 9999), rng.choice(WORDS), rng.choice(CITIES)]) for i in range(fields)})


def _system(kind: str, tools: list[dict[str, Any]]) -> str:
    """An agent's instructions: the same for every run of a kind and tool list (as an agent's
    are, so the cache's longest prefix is found as in real use), 20 to 400 words."""
    rng = random.Random(f"{kind}{[t['name'] for t in tools]}")
    names = ", ".join(t["name"] for t in tools)
    extra = " ".join(rng.choice(WORDS) for _ in range(rng.choice([20, 60, 150, 250, 400])))
    return (f"You are a helpful agent ({kind}). Tools: {names}. Think step by step, then act. "
            f"{extra}")


def requests(count: int, seed: int = 38) -> Iterator[dict[str, Any]]:
    """`count` request bodies for /v1/chat/completions, as runs of one to six turns: each turn
    re-sends the run's conversation so far plus the last answer and an observation."""
    rng = random.Random(seed)
    sent = 0
    while sent < count:
        kind = KINDS[rng.randrange(len(KINDS))]
        tools = TOOLS[:rng.randint(1, len(TOOLS))]
        question = (f"What is the {rng.choice(WORDS)} in {rng.choice(CITIES)}? "
                    f"Compare it with {rng.choice(CITIES)}.")
        messages: list[dict[str, Any]] = [{"role": "system", "content": _system(kind, tools)},
                                          {"role": "user", "content": question}]
        for _turn in range(rng.randint(1, 6)):
            if sent >= count:
                return
            if len(json.dumps(messages)) > PROMPT_CHARS:
                break
            yield _body(kind, messages, tools, rng)
            sent += 1
            messages = [*messages, {"role": "assistant", "content": rng.choice(
                ["Thought: I need a tool.", '{"thought": "check", "action": "get_weather"}',
                 "Plan: look it up\n#E1 = get_weather[Paris]"])},
                {"role": "user", "content": f"Result of {tools[0]['name']}: "
                                            f"{_observation(rng)}"}]


def _body(kind: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
          rng: random.Random) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "smollm2-135m-instruct", "messages": messages,
                            "max_tokens": rng.choice([8, 16, 32]),
                            "temperature": rng.choice([0.0, 0.2, 0.7])}
    if kind.startswith("tools"):
        body["tools"] = [_openai_tool(t) for t in tools]
        body["tool_choice"] = "auto"
    elif kind == "react_json":
        body["response_format"] = {"type": "json_object", "schema": REACT_JSON_SCHEMA}
    elif kind == "react_text":
        body["grammar"] = grammars.react_text_gbnf(
            {"type": chatml.REACT_TEXT, "tools": tools, "final": True})
    elif kind == "rewoo":
        body["grammar"] = grammars.rewoo_plan_gbnf(
            {"tools": [t["name"] for t in tools] + ["LLM"], "max_steps": 3})
    else:
        body["stop"] = ["Observation:"]
    body["stream"] = kind.endswith("stream")
    return body


def send(base_url: str, body: dict[str, Any], timeout_s: float = 300) -> int:
    """POST one body; returns how many bytes came back (a stream is read to its end)."""
    request = urllib.request.Request(base_url + "/chat/completions",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout_s) as r:
        return len(r.read())


def rss_mb(pid: int) -> float:
    """A process's resident memory (VmRSS) in MB; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def chart(samples: list[tuple[int, float]], width: int = 50) -> str:
    """One line per sample: requests so far, RSS in MB, a bar."""
    top = max((mb for _, mb in samples), default=1) or 1
    return "\n".join(f"{n:6d} {mb:8.0f} MB {'█' * max(1, round(width * mb / top))}"
                     for n, mb in samples)
