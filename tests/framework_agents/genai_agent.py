"""A plain tool loop on the openai SDK, traced by opentelemetry-instrumentation-openai-v2 (the
OpenTelemetry GenAI conventions); the invoke_agent and execute_tool spans come from
opentelemetry-util-genai's handler, which that instrumentation uses itself.

Message content is on the spans only with OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental
and OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only (the older `true` sends it as
log events, which a trace receiver never sees); without them the spans carry no content."""

from __future__ import annotations

import json

import openai
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.util.genai.handler import TelemetryHandler
from opentelemetry.util.genai.types import InputMessage, OutputMessage, Text
from weather import INSTRUCTIONS, MODEL, question, weather

provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
OpenAIInstrumentor().instrument(tracer_provider=provider)
genai = TelemetryHandler(tracer_provider=provider)

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather now in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]


def run(text: str) -> str:
    client = openai.OpenAI()
    messages: list = [{"role": "system", "content": INSTRUCTIONS},
                      {"role": "user", "content": text}]
    with genai.invoke_local_agent(agent_name="weather-agent", request_model=MODEL) as agent:
        agent.input_messages = [InputMessage(role="user", parts=[Text(content=text)])]
        answer = "no answer in 4 turns"
        for _ in range(4):
            reply = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
            message = reply.choices[0].message
            if not message.tool_calls:
                answer = message.content or ""
                break
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                with genai.tool("get_weather") as step:
                    step.tool_call_id = call.id
                    step.arguments = call.function.arguments
                    result = weather(**json.loads(call.function.arguments))
                    step.tool_result = result
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        agent.output_messages = [OutputMessage(role="assistant", parts=[Text(content=answer)],
                                                finish_reason="stop")]
    return answer


if __name__ == "__main__":
    try:
        print(run(question()))
    finally:
        provider.shutdown()
