"""Few-shot examples of the default ReAct agents, as chat turns in each mode's own format (a
135M model copies a shown exchange; it does not follow one described in the system prompt)."""

from __future__ import annotations

import json
from typing import Any

FUNCTION_CALLING = ("Answer the user's question with the tools: call the tool that has the "
                    "facts, then answer from its result in a few words.")

# (question, what it asks for, tool, arguments, result, answer). The thought restates what the
# question asks before it names the tool: a 135M model otherwise names the tool of the last
# example ("I need calculator for this." to a weather question). Answers are a few words, the
# number asked for last: a model that imitates a long answer lists every number of the result.
# A result's keys do not start like the arguments ({"city": …): the model went on writing a
# result's keys into its next Action Input. Measured alternatives: docs/PARADIGMS.md.
_EXAMPLES = [
    ("What is the weather in Rome?", "the weather in Rome", "get_weather", {"city": "Rome"},
     '{"temperature_c": 18, "condition": "sunny", "humidity_pct": 60, "city": "Rome"}',
     "Sunny and 18 °C."),
    ("What is the AQI in Oslo?", "the air quality in Oslo", "get_air_quality", {"city": "Oslo"},
     '{"aqi": 30, "category": "good", "main_pollutant": "PM2.5", "city": "Oslo"}',
     "The AQI in Oslo is 30."),
    ("What is 12 * 7?", "arithmetic", "calculator", {"expression": "12 * 7"}, "84", "84"),
]


def _thought(asks: str, tool: str) -> str:
    return f"The question asks for {asks}: {tool} gives it."


def function_calling() -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for i, (question, _asks, tool, args, result, answer) in enumerate(_EXAMPLES):
        call_id = f"example_{i}"
        turns += [{"role": "user", "content": question},
                  {"role": "assistant", "content": None, "tool_calls": [
                      {"id": call_id, "type": "function",
                       "function": {"name": tool, "arguments": json.dumps(args)}}]},
                  {"role": "tool", "tool_call_id": call_id, "content": result},
                  {"role": "assistant", "content": answer}]
    return turns


def json_mode() -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for question, asks, tool, args, result, answer in _EXAMPLES:
        call = {"thought": _thought(asks, tool), "action": tool, "action_input": args}
        done = {"thought": "I have the answer.", "action": "final_answer", "action_input": answer}
        turns += [{"role": "user", "content": f"Question: {question}"},
                  {"role": "assistant", "content": json.dumps(call, ensure_ascii=False)},
                  {"role": "user", "content": f"Observation: {result}"},
                  {"role": "assistant", "content": json.dumps(done, ensure_ascii=False)}]
    return turns


def text_mode() -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for question, asks, tool, args, result, answer in _EXAMPLES:
        turns += [{"role": "user", "content": f"Question: {question}"},
                  {"role": "assistant", "content": f"Thought: {_thought(asks, tool)}\n"
                                                   f"Action: {tool}\n"
                                                   f"Action Input: {json.dumps(args)}"},
                  {"role": "user", "content": f"Observation: {result}"},
                  {"role": "assistant", "content": "Thought: I now know the final answer\n"
                                                   f"Final Answer: {answer}"}]
    return turns


# Plan-and-Execute's planner: a task, then its plan as the JSON its schema asks for. Each step is
# a question of the kind the executor's ReAct examples answer (a step in the imperative, "Get
# the weather in Oslo with get_weather.", made the 135M executor call the tool again and again
# instead of answering). The last example is the one a small model imitates most.
_PLANS = [
    ("Which is colder right now, Oslo or Rome?",
     ["What is the weather in Oslo?", "What is the weather in Rome?",
      "Which of the two temperatures is lower?"]),
    ("What is 12 * 7?", ["What is 12 * 7?"]),
    ("What is the AQI in Oslo?", ["What is the AQI in Oslo?"]),
    ("What is the weather in Rome?", ["What is the weather in Rome?"]),
]


def planner() -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for task, steps in _PLANS:
        turns += [{"role": "user", "content": task},
                  {"role": "assistant", "content": json.dumps({"steps": steps})}]
    return turns


# ReWOO's planner: a task, then its plan in ReWOO's own format (the grammar of the embedded
# model holds it to "Plan: …" and "#E<n> = <tool>[<input>]"). One plan for each kind of task.
# (Plan lines in the ReAct thoughts' style, "The question asks for arithmetic: calculator gives
# it.", measured worse: 42 % against 53 %, docs/PARADIGMS.md.)
_REWOO_PLANS = [
    ("How many customers in the business database are in Brazil?",
     [("Count the customers in Brazil.",
       "sql_query[SELECT COUNT(*) FROM customers WHERE country = 'Brazil']")]),
    ("What is the category of the product with id 7 in the business database?",
     [("Look up product 7.", "sql_query[SELECT category FROM products WHERE id = 7]")]),
    ("Which city has the most customers in the business database?",
     [("Count the customers of each city.",
       "sql_query[SELECT city, COUNT(*) AS n FROM customers GROUP BY city ORDER BY n DESC "
       "LIMIT 1]")]),
    ("Review this Python code and name its most serious security problem:\n\n"
     "import pickle\n\ndef load(data):\n    return pickle.loads(data)",
     [("Check the code for security problems.",
       "check_security[def load(data): return pickle.loads(data)]")]),
    ("Which is colder right now, Oslo or Rome?",
     [("Look up the weather in Oslo.", "get_weather[Oslo]"),
      ("Look up the weather in Rome.", "get_weather[Rome]"),
      ("Compare the two temperatures.", "LLM[Which is colder, Oslo: #E1 or Rome: #E2?]")]),
    ("What is (12 + 3) * 7?", [("Work out (12 + 3) * 7.", "calculator[(12 + 3) * 7]")]),
    ("What is the AQI in Delhi?",
     [("Look up the air quality in Delhi.", "get_air_quality[Delhi]")]),
    ("What is the square root of 144?", [("Work out the square root of 144.",
                                          "calculator[sqrt(144)]")]),
    ("How warm is it in Rome right now, in °C?",
     [("Look up the weather in Rome.", "get_weather[Rome]")]),
]


def rewoo_planner() -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for task, steps in _REWOO_PLANS:
        plan = "".join(f"Plan: {why}\n#E{n} = {call}\n" for n, (why, call) in enumerate(steps, 1))
        turns += [{"role": "user", "content": f"Task: {task}"},
                  {"role": "assistant", "content": plan}]
    return turns


# Self-Ask with search: a question, its follow-ups one turn each, the search results as the
# intermediate answers (in the shape the search tool returns), then the final answer. Real-world
# facts, not the demo knowledge base's.
_SELF_ASK = [
    ("Who founded the company that makes the iPhone?",
     [("Who makes the iPhone?", "iPhone",
       "The iPhone is a line of smartphones designed and made by Apple Inc."),
      ("Who founded Apple Inc.?", "Apple Inc.",
       "Apple Inc. is a technology company founded in 1976 by Steve Jobs, Steve Wozniak and "
       "Ronald Wayne.")],
     "Steve Jobs, Steve Wozniak and Ronald Wayne"),
    ("In what city is the university where Alan Turing studied?",
     [("Where did Alan Turing study?", "Alan Turing",
       "Alan Turing was a mathematician who studied at King's College, Cambridge."),
      ("In what city is King's College, Cambridge?", "King's College, Cambridge",
       "King's College is a college of the University of Cambridge, in the city of "
       "Cambridge, England.")],
     "Cambridge"),
]


def self_ask() -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for question, hops, answer in _SELF_ASK:
        turns.append({"role": "user", "content": f"Question: {question}"})
        for i, (follow_up, title, snippet) in enumerate(hops):
            needed = "Are follow up questions needed here: Yes.\n" if i == 0 else ""
            found = json.dumps([{"title": title, "snippet": snippet, "score": 12.0}],
                               ensure_ascii=False)
            turns += [{"role": "assistant", "content": f"{needed}Follow up: {follow_up}"},
                      {"role": "user", "content": f"Intermediate answer: {found}"}]
        turns.append({"role": "assistant", "content": f"So the final answer is: {answer}"})
    return turns
