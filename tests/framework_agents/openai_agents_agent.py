"""An OpenAI Agents SDK agent in chat-completions mode, traced by
openinference-instrumentation-openai-agents (which replaces the SDK's own trace processors)."""

from __future__ import annotations

from agents import Agent, Runner, function_tool, set_default_openai_api
from openinference.instrumentation import TracerProvider
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from weather import INSTRUCTIONS, MODEL, question, weather

provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
set_default_openai_api("chat_completions")  # any OpenAI-compatible server, not the Responses API


@function_tool
def get_weather(city: str) -> str:
    """Weather now in a city."""
    return weather(city)


if __name__ == "__main__":
    try:
        agent = Agent(name="weather-agent", instructions=INSTRUCTIONS, model=MODEL,
                      tools=[get_weather])
        print(Runner.run_sync(agent, question()).final_output)
    finally:
        provider.shutdown()
