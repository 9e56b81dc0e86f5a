"""Spans made by the real OpenTelemetry SDK, as an instrumented agent's exporter sends them:
`AgentTrace` builds one agent's trace (a root AGENT span, an LLM call that asks for a tool, the
tool, a second LLM call with the answer) span by span, and `encoded` turns ended spans into the
protobuf body of an OTLP/HTTP export request (the SDK's own encoder)."""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode


def encoded(spans: list[ReadableSpan]) -> bytes:
    """The body an OTLP/HTTP protobuf exporter POSTs for `spans`."""
    return encode_spans(spans).SerializeToString()


def messages(prefix: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, m in enumerate(items):
        out[f"{prefix}.{i}.message.role"] = m["role"]
        out[f"{prefix}.{i}.message.content"] = m.get("content") or ""
        for j, call in enumerate(m.get("tool_calls") or []):
            base = f"{prefix}.{i}.message.tool_calls.{j}.tool_call"
            out[f"{base}.id"] = call["id"]
            out[f"{base}.function.name"] = call["name"]
            out[f"{base}.function.arguments"] = json.dumps(call["arguments"])
    return out


class AgentTrace:
    """One run of a small weather agent, instrumented the OpenInference way; each span is
    in `ended` once it ends (in the order an exporter sends them: children first)."""

    QUESTION = "Weather in Paris?"

    def __init__(self, service: str = "weather-app", project: str | None = None) -> None:
        attrs = {"service.name": service}
        if project:
            attrs["openinference.project.name"] = project
        self.memory = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create(attrs))
        self.provider.add_span_processor(SimpleSpanProcessor(self.memory))
        self.tracer = self.provider.get_tracer("openinference.instrumentation.test", "1.0")
        self.root: Any = None

    @property
    def ended(self) -> list[ReadableSpan]:
        return list(self.memory.get_finished_spans())

    def start(self) -> None:
        self.root = self.tracer.start_span("weather agent", attributes={
            "openinference.span.kind": "AGENT", "input.value": self.QUESTION,
            "input.mime_type": "text/plain"})

    def _child(self, name: str, attributes: dict[str, Any]) -> Any:
        from opentelemetry import trace

        return self.tracer.start_span(name, context=trace.set_span_in_context(self.root),
                                      attributes=attributes)

    def llm_asks_tool(self) -> None:
        span = self._child("ChatCompletion", {
            "openinference.span.kind": "LLM", "llm.model_name": "gpt-test",
            "llm.token_count.prompt": 20, "llm.token_count.completion": 5,
            **messages("llm.input_messages", [{"role": "user", "content": self.QUESTION}]),
            **messages("llm.output_messages", [{"role": "assistant", "content": "", "tool_calls": [
                {"id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}]}])})
        span.end()

    def tool(self, result: str = "sunny, 21 °C", *, fail: bool = False) -> None:
        span = self._child("get_weather", {
            "openinference.span.kind": "TOOL", "tool.name": "get_weather",
            "input.value": '{"city": "Paris"}', "input.mime_type": "application/json",
            "output.value": result})
        if fail:
            span.set_status(Status(StatusCode.ERROR, "the weather service is down"))
        span.end()

    def llm_answers(self, answer: str = "It is sunny in Paris.") -> None:
        span = self._child("ChatCompletion", {
            "openinference.span.kind": "LLM", "llm.model_name": "gpt-test",
            "llm.token_count.prompt": 40, "llm.token_count.completion": 8,
            **messages("llm.input_messages", [{"role": "user", "content": self.QUESTION}]),
            **messages("llm.output_messages", [{"role": "assistant", "content": answer}])})
        span.end()

    def finish(self, answer: str = "It is sunny in Paris.") -> None:
        self.root.set_attribute("output.value", answer)
        self.root.end()

    def whole(self, result: str = "sunny, 21 °C") -> list[ReadableSpan]:
        self.start()
        self.llm_asks_tool()
        self.tool(result)
        self.llm_answers()
        self.finish()
        return self.ended
