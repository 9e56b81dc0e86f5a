"""A plain tool loop on the openai SDK, traced by openinference-instrumentation-openai; the
agent and tool spans come from OpenInference's own tracer decorators."""

from __future__ import annotations

import json

import openai
from openinference.instrumentation import TracerProvider
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from weather import INSTRUCTIONS, MODEL, question, weather

provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
OpenAIInstrumentor().instrument(tracer_provider=provider)
tracer = provider.get_tracer("weather-agent")

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather now in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]


@tracer.tool(name="get_weather", description="Weather now in a city.")
def get_weather(city: str) -> str:
    return weather(city)


@tracer.agent(name="weather-agent")
def run(text: str) -> str:
    client = openai.OpenAI()
    messages: list = [{"role": "system", "content": INSTRUCTIONS},
                      {"role": "user", "content": text}]
    for _ in range(4):
        reply = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
        message = reply.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            result = get_weather(**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return "no answer in 4 turns"


if __name__ == "__main__":
    try:
        print(run(question()))
    finally:
        provider.shutdown()  # flushes the batch of spans
