"""A LlamaIndex FunctionAgent on llama-index-llms-openai, traced by
openinference-instrumentation-llama-index."""

from __future__ import annotations

import asyncio
import os

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.tools import FunctionTool
from llama_index.llms.openai import OpenAI
from openinference.instrumentation import TracerProvider
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from weather import INSTRUCTIONS, MODEL, question, weather

provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
LlamaIndexInstrumentor().instrument(tracer_provider=provider)


def get_weather(city: str) -> str:
    """Weather now in a city."""
    return weather(city)


async def main(text: str) -> str:
    llm = OpenAI(model=MODEL, api_base=os.environ["OPENAI_BASE_URL"],
                 api_key=os.environ["OPENAI_API_KEY"])
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(get_weather)], llm=llm,
                          system_prompt=INSTRUCTIONS)
    return str(await agent.run(user_msg=text))


if __name__ == "__main__":
    try:
        print(asyncio.run(main(question())))
    finally:
        provider.shutdown()
