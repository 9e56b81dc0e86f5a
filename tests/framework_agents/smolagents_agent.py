"""A smolagents ToolCallingAgent on its OpenAI model, traced by
openinference-instrumentation-smolagents."""

from __future__ import annotations

import os

from openinference.instrumentation import TracerProvider
from openinference.instrumentation.smolagents import SmolagentsInstrumentor
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from smolagents import OpenAIModel, ToolCallingAgent, tool
from weather import INSTRUCTIONS, MODEL, question, weather

provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
SmolagentsInstrumentor().instrument(tracer_provider=provider)


@tool
def get_weather(city: str) -> str:
    """Weather now in a city.

    Args:
        city: the city's name.
    """
    return weather(city)


if __name__ == "__main__":
    try:
        model = OpenAIModel(model_id=MODEL, api_base=os.environ["OPENAI_BASE_URL"],
                            api_key=os.environ["OPENAI_API_KEY"])
        agent = ToolCallingAgent(tools=[get_weather], model=model, instructions=INSTRUCTIONS,
                                 max_steps=4, verbosity_level=0)
        print(agent.run(question()))
    finally:
        provider.shutdown()
