"""A trace's run fields (pure) from what its spans and steps add up to (`Gathered`): gathered
in one go from a trace in hand (traces/otel/steps.py `run_from_trace`), or span by span while
a big file streams (traces/otel/streamed.py), so both make the same run of the same spans."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from traces.otel import frameworks, kept
from traces.otel.decode import OTLPError, Span
from traces.otel.values import cut, text
from traces.schema import FINISHED_STATUSES, Step

# What the OpenTelemetry GenAI instrumentations need to put content on the spans (with only
# CAPTURE_MESSAGE_CONTENT=true, opentelemetry-instrumentation-openai-v2 sends it as log events,
# which a trace receiver never sees).
_GENAI_CONTENT = ("OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental and "
                  "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only")
NO_CONTENT = ("the instrumentation recorded no message content on its spans; set "
              f"{_GENAI_CONTENT} (OpenInference: leave OPENINFERENCE_HIDE_INPUTS and "
              "OPENINFERENCE_HIDE_OUTPUTS unset) to see it")
NO_TOOL_CONTENT = ("the instrumentation recorded no tool arguments or result on its spans; "
                   f"set {_GENAI_CONTENT} to see them")


@dataclass
class Gathered:
    """A trace's spans and (demoted) steps added up: all a run's fields need of them."""

    spans: int = 0
    start: int | None = None
    end: int | None = None
    framework: dict[str, str] = field(default_factory=dict)
    llm_calls: int = 0
    tool_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    first_call: Step | None = None  # the first llm step (the question may be in it)
    answering: Step | None = None  # the last llm step that answers (frameworks.answers)
    not_recorded: bool = False

    def add_span(self, span: Span) -> None:
        self.spans += 1
        self.start = span.start_ns if self.start is None else min(self.start, span.start_ns)
        self.end = span.end_ns if self.end is None else max(self.end, span.end_ns)

    def add_step(self, step: Step) -> None:
        """A step, in any order (its seq says which is first and last)."""
        if step.kind == "llm":
            self.llm_calls += 1
            self.tokens_in += step.tokens_in
            self.tokens_out += step.tokens_out
            self.cost_usd += step.cost_usd
            if self.first_call is None or step.seq < self.first_call.seq:
                self.first_call = step
            if frameworks.answers(step) and (self.answering is None
                                             or step.seq > self.answering.seq):
                self.answering = step
        elif step.kind == "tool":
            self.tool_calls += 1
        if step.meta.get("otel.content") == "not recorded":
            self.not_recorded = True


def gather(spans: list[Span], steps: list[Step]) -> Gathered:
    g = Gathered(framework=frameworks.framework(spans))
    for span in spans:
        g.add_span(span)
    for step in steps:
        g.add_step(step)
    return g


def root_error(span: Span) -> str:
    """What a failed root span says went wrong (a run's error), "" if it did not fail."""
    return (span.status_message or kept.exception(span) or "failed") if span.error else ""


def run_fields(container: Span | None, first: Span, last: Span, error: str,
               g: Gathered) -> dict[str, Any]:
    """The run's fields: `container` the root span that is the run itself (or None), `first`
    and `last` the first and last root spans by start time, `error` the first failed root's."""
    first_span, last = (container, container) if container else (first, last)
    a = container.attributes if container else {}
    status = a.get("agentlab.run.status")
    if status not in FINISHED_STATUSES:
        status = "failed" if error else "succeeded"
    resource = first_span.resource
    steps = [s for s in (g.first_call, g.answering) if s is not None]
    if "agentlab.run.id" in a:  # ours: the question and answer as the run recorded them
        question, answer = text(a.get("input.value")), text(a.get("output.value"))
    else:
        question = frameworks.question(first_span, steps)
        answer = frameworks.answer(container or last, steps)
    origin = {"format": "otlp", "trace_id": first_span.trace_id,
              "service": str(resource.get("service.name") or ""),
              "project": str(resource.get("openinference.project.name") or ""),
              "scope": first_span.scope, "spans": g.spans,
              **g.framework, "resource": resource}
    if container is not None and "agentlab.run.id" not in a:  # what the run's span held
        root = {k: v for k, v in kept.meta(container, "", False).items()
                if k not in ("otel.span", "otel.span_id")}
        for key, found in (("input.value", question), ("output.value", answer)):
            if a.get(key) not in (None, "", found):  # a framework's own state
                root[key] = cut(text(a[key]))
        if root:
            origin["root"] = root
    if g.not_recorded:
        origin["note"] = NO_CONTENT
    start, end = g.start or 0, g.end or 0
    return {
        "agent": None, "agent_name": cut(first_span.name, 200),
        "paradigm": cut(str(a.get("agentlab.run.paradigm") or ""), 50),
        "input": cut(question), "final_answer": cut(answer),
        "status": status, "error": cut(error),
        "agent_snapshot": {"imported_from": origin},
        "llm_calls": g.llm_calls, "tool_calls": g.tool_calls,
        "tokens_in": g.tokens_in, "tokens_out": g.tokens_out,
        "cost_usd": g.cost_usd, "wall_ms": (end - start) / 1e6,
        "started_at_ns": start, "finished_at_ns": end,
    }


def dated(fields: dict[str, Any]) -> dict[str, Any]:
    """run_fields' times (ns) as the run's dates; OTLPError if one is not a date."""
    fields["started_at"] = _when(fields.pop("started_at_ns"))
    fields["finished_at"] = _when(fields.pop("finished_at_ns"))
    return fields


def _when(ns: int) -> datetime | None:
    try:
        return datetime.fromtimestamp(ns / 1e9, tz=UTC) if ns else None
    except (OverflowError, OSError, ValueError):
        raise OTLPError(f"a span's time ({ns} ns) is not a date") from None
