"""A LangGraph ReAct agent on langchain-openai, traced by
openinference-instrumentation-langchain."""

from __future__ import annotations

import warnings

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from openinference.instrumentation import TracerProvider
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from weather import INSTRUCTIONS, MODEL, question, weather

provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
LangChainInstrumentor().instrument(tracer_provider=provider)

with warnings.catch_warnings():  # create_react_agent's move to langchain.agents
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent


@tool
def get_weather(city: str) -> str:
    """Weather now in a city."""
    return weather(city)


if __name__ == "__main__":
    try:
        agent = create_react_agent(ChatOpenAI(model=MODEL), [get_weather], prompt=INSTRUCTIONS)
        state = agent.invoke({"messages": [("user", question())]})
        print(state["messages"][-1].content)
    finally:
        provider.shutdown()
