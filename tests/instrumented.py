"""Traces made by a real OpenInference-instrumented app: the openai SDK, wrapped by
`openinference-instrumentation-openai`, talking to the scripted server on loopback, inside an
AGENT span with a TOOL span between the calls (as agent frameworks' instrumentations make
them), recorded by the OpenTelemetry SDK's in-memory exporter. Import tests read these, so
what they import is what such apps send, not spans written by hand."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import openai
from google.protobuf import json_format
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from tests.fake_openai import FakeOpenAI, Reply

QUESTION = "What is the weather in Paris?"
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather now in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
SCRIPT = (Reply(tool_calls=[("get_weather", '{"city": "Paris"}')], usage=(40, 12)),
          Reply(text="It is sunny in Paris, 21 °C.", usage=(60, 9)))


@contextmanager
def instrumented(*exporters: SpanExporter, project: str = "weather-app"
                 ) -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """A tracer provider with the openai SDK instrumented, recording in memory (and to
    `exporters`, e.g. an OTLP exporter to Phoenix)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({
        "service.name": "weather-app", "openinference.project.name": project}))
    for exporter in (memory, *exporters):
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield provider, memory
    finally:
        instrumentor.uninstrument()
        provider.shutdown()


def weather_agent(provider: TracerProvider, server: FakeOpenAI, *, fail_tool: bool = False,
                  question: str = QUESTION) -> str:
    """One agent turn: model call -> tool -> model call, under an AGENT span."""
    server.script(*SCRIPT)
    tracer = provider.get_tracer("weather-app")
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-scripted", max_retries=0)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You report weather."},
                                      {"role": "user", "content": question}]
    with tracer.start_as_current_span("weather-agent", attributes={
            "openinference.span.kind": "AGENT", "input.value": question,
            "input.mime_type": "text/plain", "user.id": "carol",
            "session.id": "session-7"}) as agent:
        first = client.chat.completions.create(model="scripted-model", messages=messages,
                                               tools=TOOLS)
        call = first.choices[0].message.tool_calls[0]
        with tracer.start_as_current_span("get_weather", attributes={
                "openinference.span.kind": "TOOL", "tool.name": "get_weather",
                "input.value": call.function.arguments, "input.mime_type": "application/json",
                "weather.station": "LFPG"}) as tool:
            if fail_tool:
                tool.set_status(Status(StatusCode.ERROR, "station offline"))
                tool.record_exception(RuntimeError("station offline"))
                observation = "error: station offline"
            else:
                observation = "sunny, 21 °C"
            tool.set_attribute("output.value", observation)
        messages += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": call.id, "type": "function",
             "function": {"name": "get_weather", "arguments": call.function.arguments}}]},
                     {"role": "tool", "tool_call_id": call.id, "content": observation}]
        second = client.chat.completions.create(model="scripted-model", messages=messages,
                                                tools=TOOLS)
        answer = second.choices[0].message.content or ""
        agent.set_attribute("output.value", answer)
    return answer


def protobuf(spans: list[ReadableSpan]) -> bytes:
    return encode_spans(spans).SerializeToString()


def otlp_json(spans: list[ReadableSpan]) -> dict[str, Any]:
    """OTLP/JSON as the spec writes it (hex ids)."""
    doc = json_format.MessageToDict(encode_spans(spans))
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return doc


def json_bytes(doc: Any) -> bytes:
    return json.dumps(doc).encode()
