"""The spans `manage.py bench_ingest` sends: agent traces as the OpenInference instrumentors
write them, encoded by the OpenTelemetry SDK's own OTLP encoder into the requests its
BatchSpanProcessor + OTLPSpanExporter send (protobuf ExportTraceServiceRequest, 512 spans each).

A trace of N spans: a root AGENT span, then turns of a CHAIN span holding an LLM call (system,
user and the last tool exchange as input messages, a tool call or the answer out, tokens) and
a TOOL span; a last LLM span or two fill it up to N. Spans are exported as an SDK exports them:
in the order they end, so children come before their parents and the root comes last. Each
span starts on its own millisecond, so a step's `started_at` names the span it came from.

Pure: no Django, no network.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

BATCH = 512  # the BatchSpanProcessor's max_export_batch_size
TICK_NS = 1_000_000  # one millisecond: every span of a trace starts on its own tick
SCOPE = InstrumentationScope("openinference.instrumentation.openai", "0.1.30")
MODEL = "gpt-4o-mini-2024-07-18"
SYSTEM = "You are a careful assistant. Use the tools when a fact or a sum is needed."
TOOLS = [{"type": "function", "function": {
    "name": "search_docs", "description": "Search the product documentation.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                   "required": ["query"]}}}]
_FLAGS = TraceFlags(TraceFlags.SAMPLED)


@dataclass(frozen=True)
class Trace:
    trace_id: int
    project: str
    spans: list[ReadableSpan]  # in export order: as they end, the root last (if any)
    root: bool  # has its root span: the run is over once it arrives

    @property
    def hex_id(self) -> str:
        return f"{self.trace_id:032x}"


def resource(project: str) -> Resource:
    return Resource({"service.name": "bench-agent", "openinference.project.name": project,
                     "telemetry.sdk.language": "python", "telemetry.sdk.name": "opentelemetry",
                     "telemetry.sdk.version": "1.45.2"})


def start_key(started_at_s: float) -> int:
    """The tick a span (or its step's `started_at`, in seconds) starts on."""
    return round(started_at_s * 1e9 / TICK_NS)


class TraceBuilder:
    """Spans of one trace; `rng` picks the ids (distinct traces per builder)."""

    def __init__(self, rng: random.Random, res: Resource, start_ns: int, question: str) -> None:
        self.rng, self.res = rng, res
        self.trace_id = rng.getrandbits(128) or 1
        self.t = start_ns - start_ns % TICK_NS  # on a tick: the start keys are exact
        self.question = question
        self.spans: list[ReadableSpan] = []

    def tick(self, n: int = 1) -> int:
        self.t += n * TICK_NS
        return self.t

    def new_id(self) -> int:
        return self.rng.getrandbits(64) or 1

    def span(self, name: str, parent: int | None, start: int, end: int,
             attributes: dict[str, object], kind: SpanKind = SpanKind.INTERNAL,
             span_id: int | None = None) -> int:
        span_id = span_id or self.new_id()
        context = SpanContext(self.trace_id, span_id, is_remote=False, trace_flags=_FLAGS)
        parent_ctx = (SpanContext(self.trace_id, parent, is_remote=False, trace_flags=_FLAGS)
                      if parent is not None else None)
        self.spans.append(ReadableSpan(
            name=name, context=context, parent=parent_ctx, resource=self.res,
            attributes=attributes, status=Status(StatusCode.OK), kind=kind,
            start_time=start, end_time=end, instrumentation_scope=SCOPE))
        return span_id

    def llm(self, parent: int, turn: int, *, final: bool) -> None:
        start = self.tick()
        end = self.tick()
        query = f"step {turn} of: {self.question}"
        messages = [{"role": "system", "content": SYSTEM},
                    {"role": "user", "content": self.question}]
        if turn:
            messages += [{"role": "assistant", "content": None, "tool_calls": [_call(turn - 1)]},
                         {"role": "tool", "content": _result(turn - 1),
                          "tool_call_id": f"call_{turn - 1}"}]
        attrs: dict[str, object] = {
            "openinference.span.kind": "LLM", "llm.system": "openai", "llm.provider": "openai",
            "llm.model_name": MODEL,
            "llm.invocation_parameters": json.dumps({"model": MODEL, "temperature": 0.0,
                                                     "tool_choice": "auto"}),
            "input.value": json.dumps({"messages": messages, "model": MODEL, "tools": TOOLS}),
            "input.mime_type": "application/json",
            "llm.tools.0.tool.json_schema": json.dumps(TOOLS[0]),
        }
        for i, m in enumerate(messages):
            p = f"llm.input_messages.{i}.message"
            attrs[f"{p}.role"] = m["role"]
            if m.get("content"):
                attrs[f"{p}.content"] = m["content"]
            for j, call in enumerate(m.get("tool_calls") or []):
                attrs[f"{p}.tool_calls.{j}.tool_call.id"] = call["id"]
                attrs[f"{p}.tool_calls.{j}.tool_call.function.name"] = call["function"]["name"]
                attrs[f"{p}.tool_calls.{j}.tool_call.function.arguments"] = \
                    call["function"]["arguments"]
        out = "llm.output_messages.0.message"
        attrs[f"{out}.role"] = "assistant"
        if final:
            answer = f"Here is what the documentation says about {query}."
            attrs[f"{out}.content"] = answer
            reply: dict[str, object] = {"role": "assistant", "content": answer}
        else:
            call = _call(turn)
            attrs[f"{out}.tool_calls.0.tool_call.id"] = call["id"]
            attrs[f"{out}.tool_calls.0.tool_call.function.name"] = "search_docs"
            attrs[f"{out}.tool_calls.0.tool_call.function.arguments"] = \
                call["function"]["arguments"]
            reply = {"role": "assistant", "content": None, "tool_calls": [call]}
        prompt, completion = 180 + 60 * len(messages), 24 + turn % 40
        attrs |= {"output.value": json.dumps({"id": f"chatcmpl-{turn}", "model": MODEL,
                                              "choices": [{"index": 0, "message": reply}]}),
                  "output.mime_type": "application/json",
                  "llm.token_count.prompt": prompt, "llm.token_count.completion": completion,
                  "llm.token_count.total": prompt + completion}
        self.span("ChatCompletion", parent, start, end, attrs, SpanKind.CLIENT)

    def tool(self, parent: int, turn: int) -> None:
        start = self.tick()
        end = self.tick()
        self.span("search_docs", parent, start, end, {
            "openinference.span.kind": "TOOL", "tool.name": "search_docs",
            "tool.description": TOOLS[0]["function"]["description"],
            "tool.parameters": json.dumps(TOOLS[0]["function"]["parameters"]),
            "input.value": _call(turn)["function"]["arguments"],
            "input.mime_type": "application/json", "output.value": _result(turn)})

    def turn(self, parent: int, turn: int) -> None:
        """CHAIN(LLM asking for the tool, TOOL): three spans, the chain's last (it ends last)."""
        start, chain = self.tick(), self.new_id()
        self.llm(chain, turn, final=False)
        self.tool(chain, turn)
        self.span(f"agent turn {turn}", parent, start, self.tick(),
                  {"openinference.span.kind": "CHAIN",
                   "input.value": f"turn {turn}: {self.question}",
                   "output.value": _result(turn)}, span_id=chain)


def agent_trace(rng: random.Random, project: str, n_spans: int, *, start_ns: int | None = None,
                root: bool = True, number: int = 0) -> Trace:
    """One agent run of `n_spans` spans (the root included when `root`; without it the trace
    stays open, as a run still going)."""
    if n_spans < 1:
        raise ValueError("a trace has at least one span")
    question = f"How do I rotate the API keys of project {number}?"
    b = TraceBuilder(rng, resource(project), time.time_ns() if start_ns is None else start_ns,
                     question)
    root_start, root_id = b.t, b.new_id()
    children = n_spans - 1 if root else n_spans
    turns, rest = divmod(children, 3)
    for k in range(turns):
        b.turn(root_id, k)
    for k in range(rest):
        b.llm(root_id, turns + k, final=True)
    if root:
        b.span("ReAct agent", None, root_start, b.tick(),
               {"openinference.span.kind": "AGENT", "input.value": question,
                "output.value": f"Rotate them under Settings → Keys ({number}).",
                "session.id": f"bench-session-{number % 50}"}, span_id=root_id)
    return Trace(b.trace_id, project, b.spans, root)


def agent_traces(rng: random.Random, project: str, traces: int, spans_each: int,
                 start_ns: int | None = None) -> list[Trace]:
    """`traces` runs one after another (each starts when the one before ended)."""
    t = time.time_ns() if start_ns is None else start_ns
    out = []
    for i in range(traces):
        trace = agent_trace(rng, project, spans_each, start_ns=t, number=i)
        out.append(trace)
        t = max(s.end_time or 0 for s in trace.spans) + TICK_NS
    return out


def export_order(traces: list[Trace]) -> list[ReadableSpan]:
    """Every span in the order they end (the order a BatchSpanProcessor queues them)."""
    spans = [s for t in traces for s in t.spans]
    return sorted(spans, key=lambda s: s.end_time or 0)


def batches(spans: list[ReadableSpan], size: int = BATCH) -> Iterator[list[ReadableSpan]]:
    for i in range(0, len(spans), size):
        yield spans[i:i + size]


def encode(spans: list[ReadableSpan]) -> bytes:
    """What OTLPSpanExporter.export puts in the request body (the same call)."""
    return encode_spans(spans).SerializePartialToString()


def bodies(spans: list[ReadableSpan], size: int = BATCH) -> list[tuple[int, bytes]]:
    """(spans in it, body) per request."""
    return [(len(b), encode(b)) for b in batches(spans, size)]


def _call(turn: int) -> dict[str, object]:
    return {"id": f"call_{turn}", "type": "function",
            "function": {"name": "search_docs",
                         "arguments": json.dumps({"query": f"key rotation, part {turn}"})}}


def _result(turn: int) -> str:
    return (f"Keys rotate under Settings → Keys (section {turn}). A rotated key stays valid for "
            "24 hours so running jobs can finish; revoke it sooner from the same page.")
