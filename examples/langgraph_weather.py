"""A LangGraph agent that knows nothing of Agent Lab, run through its gateway (examples/README.md):
each run of it becomes a recorded run that you can hold at a breakpoint, edit, replay and fork.

    OPENAI_BASE_URL=http://127.0.0.1:8000/gateway/v1 OPENAI_API_KEY=<token> \\
        python examples/langgraph_weather.py "Is it warm in Paris?"

It needs `langgraph` and `langchain-openai` (its own environment, not Agent Lab's). The model is
the profile the gateway finds under AGENT_MODEL's name; by default the embedded one.
"""

from __future__ import annotations

import os
import sys

from langchain_core.messages import SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.errors import GraphRecursionError
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition

MODEL = os.environ.get("AGENT_MODEL", "Local SmolLM2")
PROMPT = "You report the weather. Call get_weather for the city, then answer in one sentence."
STATIONS = {"paris": "sunny, 21 °C", "london": "rain, 12 °C", "oslo": "snow, -3 °C"}
MAX_STEPS = 8  # a small model may call tools for ever: LangGraph stops the graph here


@tool
def get_weather(city: str) -> str:
    """The weather now in a city."""
    return STATIONS.get(city.strip().lower(), f"no weather station in {city}")


def build() -> CompiledStateGraph:
    """think -> (tools -> think)* : the model, and the tools it asks for, until it answers."""
    model = ChatOpenAI(model=MODEL, temperature=0).bind_tools([get_weather])

    def think(state: MessagesState) -> dict:
        return {"messages": [model.invoke([SystemMessage(PROMPT), *state["messages"]])]}

    graph = StateGraph(MessagesState)
    graph.add_node("think", think)
    graph.add_node("tools", ToolNode([get_weather]))
    graph.add_edge(START, "think")
    graph.add_conditional_edges("think", tools_condition)  # tool calls -> tools, else the end
    graph.add_edge("tools", "think")
    return graph.compile()


def main(question: str) -> int:
    try:
        state = build().invoke({"messages": [("user", question)]},
                               {"recursion_limit": MAX_STEPS})
    except GraphRecursionError:
        print(f"No answer within {MAX_STEPS} steps.")
        return 1
    print(state["messages"][-1].content)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f'usage: {sys.argv[0]} "QUESTION"')
    sys.exit(main(sys.argv[1]))
