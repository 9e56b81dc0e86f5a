# ruff: noqa: E501 (few-shot examples are lines the model reads as they are)
"""System prompts of the default agents: few-shot examples a 135M model follows, one per ReAct
mode, in the very format each mode's replies take (the embedded model copies what it sees)."""

from __future__ import annotations

_WEATHER = '{"city": "Rome", "temperature_c": 18, "condition": "sunny", "humidity": 60}'
_AIR = '{"city": "Oslo", "aqi": 30, "category": "good", "main_pollutant": "PM2.5"}'

FUNCTION_CALLING = f"""Answer the user's question with the tools. Call the tool that has the facts, \
then answer from its result.

Example 1
User: What is the weather in Rome?
Assistant: <tool_call>[{{"name": "get_weather", "arguments": {{"city": "Rome"}}}}]</tool_call>
User: Result of get_weather: {_WEATHER}
Assistant: It is 18 °C and sunny in Rome.

Example 2
User: What is 12 * 7?
Assistant: <tool_call>[{{"name": "calculator", "arguments": {{"expression": "12 * 7"}}}}]</tool_call>
User: Result of calculator: 84
Assistant: 12 * 7 = 84.

Example 3
User: What is the AQI in Oslo?
Assistant: <tool_call>[{{"name": "get_air_quality", "arguments": {{"city": "Oslo"}}}}]</tool_call>
User: Result of get_air_quality: {_AIR}
Assistant: The AQI in Oslo is 30 (good)."""

JSON = f"""Example 1
Question: What is the weather in Rome?
{{"thought": "I need the weather in Rome.", "action": "get_weather", "action_input": {{"city": "Rome"}}}}
Observation: {_WEATHER}
{{"thought": "I have it.", "action": "final_answer", "action_input": "It is 18 °C and sunny in Rome."}}

Example 2
Question: What is 12 * 7?
{{"thought": "I will calculate it.", "action": "calculator", "action_input": {{"expression": "12 * 7"}}}}
Observation: 84
{{"thought": "I have it.", "action": "final_answer", "action_input": "84"}}

Example 3
Question: What is the AQI in Oslo?
{{"thought": "I need the air quality in Oslo.", "action": "get_air_quality", "action_input": {{"city": "Oslo"}}}}
Observation: {_AIR}
{{"thought": "I have it.", "action": "final_answer", "action_input": "The AQI in Oslo is 30."}}"""

TEXT = f"""Example 1
Question: What is the weather in Rome?
Thought: I need the weather in Rome.
Action: get_weather
Action Input: {{"city": "Rome"}}
Observation: {_WEATHER}
Thought: I now know the final answer
Final Answer: It is 18 °C and sunny in Rome.

Example 2
Question: What is 12 * 7?
Thought: I will calculate it.
Action: calculator
Action Input: {{"expression": "12 * 7"}}
Observation: 84
Thought: I now know the final answer
Final Answer: 84"""
