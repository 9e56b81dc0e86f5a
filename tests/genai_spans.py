"""Spans in the OpenTelemetry GenAI conventions, made by the real OpenTelemetry SDK (a
tracer, its spans, attributes and events, the OTLP protobuf encoder), shaped as the
conventions and `opentelemetry-instrumentation-openai-v2` write them: an `invoke_agent` root,
`chat` calls, an `execute_tool` between them. Messages ride as the current JSON attributes
(`content="attributes"`), as the span events before semconv 1.37 (`"events"`), or not at all
(`"none"`: the instrumentations' default)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode, Tracer

from tests.instrumented import protobuf
from traces.otel.decode import Span, traces

Content = Literal["attributes", "events", "none"]
SCOPE, SCOPE_VERSION = "opentelemetry.instrumentation.openai_v2", "2.1b0"
QUESTION = "What is the weather in Paris?"
ANSWER = "It is sunny in Paris, 21 °C."
SYSTEM = "You report weather."
TOOLS = [{"type": "function", "name": "get_weather", "description": "Weather now in a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]


@contextmanager
def tracer(service: str = "weather-genai") -> Iterator[tuple[Tracer, InMemorySpanExporter]]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    try:
        yield provider.get_tracer(SCOPE, SCOPE_VERSION), memory
    finally:
        provider.shutdown()


def spans_of(finished: list[ReadableSpan]) -> list[Span]:
    """What the OTLP reader gets from these spans (through the SDK's protobuf encoder)."""
    (spans,) = traces(protobuf(finished)).values()
    return spans


def weather_turn(t: Tracer, content: Content = "attributes", *, call_id: str = "call_1",
                 result: str = "sunny, 21 °C", response_id: str = "chatcmpl-1",
                 agent: str = "weather") -> None:
    """invoke_agent -> chat (asks for get_weather) -> execute_tool -> chat (answers)."""
    with t.start_as_current_span(f"invoke_agent {agent}", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent,
            "gen_ai.provider.name": "openai"}):
        user = [{"role": "system", "parts": [{"type": "text", "content": SYSTEM}]},
                {"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]
        ask = {"role": "assistant", "parts": [{"type": "tool_call", "id": call_id,
                                                "name": "get_weather",
                                                "arguments": {"city": "Paris"}}]}
        chat(t, content, user, ask, "tool_calls", (40, 12), response_id)
        with t.start_as_current_span("execute_tool get_weather", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.id": call_id, "gen_ai.tool.type": "function",
                **({"gen_ai.tool.call.arguments": '{"city": "Paris"}',
                    "gen_ai.tool.call.result": result} if content != "none" else {})}):
            pass
        back = {"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id,
                                           "response": result}]}
        said = {"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}
        chat(t, content, [*user, ask, back], said, "stop", (60, 9), response_id + "b")


def chat(t: Tracer, content: Content, messages: list[dict[str, Any]],
         reply: dict[str, Any], finish: str, usage: tuple[int, int], response_id: str) -> None:
    with t.start_as_current_span("chat gpt-4o-mini", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o-mini", "gen_ai.request.temperature": 0.2,
            "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
            "gen_ai.response.id": response_id, "gen_ai.response.finish_reasons": [finish],
            "gen_ai.usage.input_tokens": usage[0], "gen_ai.usage.output_tokens": usage[1],
            "server.address": "api.openai.com"}) as span:
        if content == "attributes":
            system, rest = messages[0], messages[1:]
            span.set_attribute("gen_ai.system_instructions", json.dumps(system["parts"]))
            span.set_attribute("gen_ai.input.messages", json.dumps(rest))
            span.set_attribute("gen_ai.output.messages",
                               json.dumps([{**reply, "finish_reason": finish}]))
            span.set_attribute("gen_ai.tool.definitions", json.dumps(TOOLS))
        elif content == "events":
            for m in messages:
                span.add_event(f"gen_ai.{m['role']}.message", _event_body(m))
            choice = {"index": 0, "finish_reason": finish,
                      "message": {"role": "assistant", **_event_body(reply, raw=True)}}
            span.add_event("gen_ai.choice", {"gen_ai.system": "openai",
                                             "gen_ai.event.content": json.dumps(choice)})


def _event_body(m: dict[str, Any], raw: bool = False) -> dict[str, Any]:
    """A message as the pre-1.37 event body: content, tool_calls (OpenAI's shape), id."""
    body: dict[str, Any] = {}
    texts = [p["content"] for p in m["parts"] if p["type"] == "text"]
    if texts:
        body["content"] = "".join(texts)
    calls = [{"id": p["id"], "type": "function", "function": {
        "name": p["name"], "arguments": json.dumps(p["arguments"])}}
        for p in m["parts"] if p["type"] == "tool_call"]
    if calls:
        body["tool_calls"] = calls
    for p in m["parts"]:
        if p["type"] == "tool_call_response":
            body |= {"id": p["id"], "content": p["response"]}
    if raw:
        return body
    return {"gen_ai.system": "openai", "gen_ai.event.content": json.dumps(body)}


def failed(t: Tracer) -> None:
    """An agent whose tool raised: the tool span and the agent's are errors."""
    with t.start_as_current_span("invoke_agent weather", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather"}) as root:
        with t.start_as_current_span("execute_tool get_weather", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.arguments": '{"city": "Atlantis"}'}) as tool:
            error = RuntimeError("no such city")
            tool.record_exception(error)
            tool.set_status(Status(StatusCode.ERROR, str(error)))
            tool.set_attribute("error.type", "RuntimeError")
        root.set_status(Status(StatusCode.ERROR, "the tool failed"))
