"""One OTLP trace -> a run's fields and steps (pure), in either convention: OpenInference
(`openinference.span.kind`) or the OpenTelemetry GenAI conventions (`gen_ai.operation.name`).

Kinds: LLM / chat, text_completion, generate_content -> llm; TOOL, RETRIEVER, RERANKER,
EMBEDDING / execute_tool, embeddings, retrieval -> tool; EVALUATOR -> evaluation; GUARDRAIL ->
guardrail; a nested AGENT / invoke_agent -> message (a sub-run); CHAIN and the rest -> thought.
A span Agent Lab exported keeps its own kind, role and name (agentlab.step.*). A root AGENT or
CHAIN (or invoke_agent) span is the run itself; any other root is a step too. Steps are
numbered depth-first by start time. An LLM span with another LLM span inside it (a framework's
call wrapping the SDK's) is one model call: the inner one is the llm step, the wrapper a
thought. Attributes, events and links nothing here reads are kept on the step's meta.
"""

from __future__ import annotations

import json
from typing import Any

from traces.otel import frameworks, genai
from traces.otel import openinference as oi
from traces.otel.decode import Span
from traces.otel.values import MAX_TEXT, amount, count, cut, first, json_like, parsed, text
from traces.schema import FINISHED_STATUSES, STEP_KINDS, Step

_KINDS = {"LLM": "llm", "TOOL": "tool", "RETRIEVER": "tool", "RERANKER": "tool",
          "EMBEDDING": "tool", "EVALUATOR": "evaluation", "GUARDRAIL": "guardrail",
          "AGENT": "message"}
_CONTAINERS = ("AGENT", "CHAIN")
_OURS = {"metadata", "agentlab.step.seq", "agentlab.step.kind", "agentlab.step.role",
         "agentlab.step.name", "agentlab.step.status"}
_READ = oi.READ | genai.READ
_READ_PREFIXES = oi.READ_PREFIXES + genai.READ_PREFIXES
NO_CONTENT = ("the instrumentation recorded no message content; set "
              "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true (OpenInference: leave "
              "OPENINFERENCE_HIDE_INPUTS and OPENINFERENCE_HIDE_OUTPUTS unset) to see it")
NO_TOOL_CONTENT = ("the instrumentation recorded no tool arguments or result; set "
                   "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true to see them")
WRAPPER = "wraps the model call below it (counted once, there)"
PREPARES = "prepares a model call beside it (counted once, there)"
_CALL_PREFIXES = ("llm.input_messages.", "llm.output_messages.", "llm.token_count.",
                  "gen_ai.usage.", "gen_ai.response.", "gen_ai.prompt.", "gen_ai.completion.")
_CALL_KEYS = {"llm.finish_reason", "gen_ai.input.messages", "gen_ai.output.messages"}


def run_from_trace(spans: list[Span]) -> tuple[dict[str, Any], list[Step]]:
    """(Run fields, steps) of one trace's spans."""
    by_id = {s.span_id: s for s in spans}
    children: dict[str, list[Span]] = {}
    roots = []
    for s in spans:
        if s.parent_id and s.parent_id in by_id and s.parent_id != s.span_id:
            children.setdefault(s.parent_id, []).append(s)
        else:
            roots.append(s)
    roots.sort(key=lambda s: s.start_ns)
    container = roots[0] if len(roots) == 1 and _is_container(roots[0]) else None
    top = sorted(children.get(container.span_id, []), key=lambda s: s.start_ns) \
        if container else roots
    main = container or roots[0]
    steps: list[Step] = []
    stack = [(s, None) for s in reversed(top)]
    seen: set[str] = set()
    calls: set[int] = set()  # seqs of the spans that record a model call themselves
    while stack:  # depth first, children by start time; a cycle is cut where it closes
        span, parent = stack.pop()
        if span.span_id in seen:
            continue
        seen.add(span.span_id)
        step = step_from_span(span, len(steps) + 1, parent)
        _where(step, span, main)
        if _records_call(span):
            calls.add(step.seq)
        steps.append(step)
        kids = sorted(children.get(span.span_id, []), key=lambda s: s.start_ns)
        stack.extend((k, step.seq) for k in reversed(kids))
    _demote_wrappers(steps, calls)
    return _run_fields(container, roots, spans, steps), steps


def _is_container(span: Span) -> bool:
    a = span.attributes
    return ("agentlab.run.id" in a or a.get("openinference.span.kind") in _CONTAINERS
            or genai.is_container(a))


def _where(step: Step, span: Span, main: Span) -> None:
    """The span's scope and resource, where they differ from the run's (kept once there)."""
    if span.scope != main.scope or span.scope_version != main.scope_version:
        step.meta["otel.scope"] = " ".join(filter(None, (span.scope, span.scope_version)))
    if span.resource != main.resource:
        step.meta["otel.resource"] = json.dumps(span.resource, ensure_ascii=False)


def _demote_wrappers(steps: list[Step], calls: set[int]) -> None:
    """Count real model calls only: an llm step with an llm step below it only wraps that
    call, and one that records no call (no messages, tokens or reply: LlamaIndex's
    `_prepare_chat_with_tools`) beside a step that does only prepares it; both are thoughts."""
    by_seq = {s.seq: s for s in steps}
    notes: dict[int, str] = {}
    for step in steps:
        if step.kind != "llm":
            continue
        parent = by_seq.get(step.parent) if step.parent is not None else None
        while parent is not None:
            if parent.kind == "llm":
                notes[parent.seq] = WRAPPER
            parent = by_seq.get(parent.parent) if parent.parent is not None else None
        if step.seq not in calls and any(s.kind == "llm" and s.parent == step.parent
                                         and s.seq in calls for s in steps):
            notes[step.seq] = PREPARES
    for seq, note in notes.items():
        step = by_seq[seq]
        step.kind, step.tokens_in, step.tokens_out, step.cost_usd = "thought", 0, 0, 0.0
        step.meta["otel.note"] = note


def _records_call(span: Span) -> bool:
    """Does the span record a model call itself: messages, tokens, a finish reason, a reply?"""
    a = span.attributes
    return ("agentlab.step.kind" in a or oi.is_chat_request(parsed(a.get("input.value")))
            or any(k.startswith(_CALL_PREFIXES) or k in _CALL_KEYS for k in a)
            or any(name in genai.EVENTS for name, _w, _a in span.events))


def _run_fields(container: Span | None, roots: list[Span], spans: list[Span],
                steps: list[Step]) -> dict[str, Any]:
    first_span, last = (container, container) if container else (roots[0], roots[-1])
    a = container.attributes if container else {}
    status = a.get("agentlab.run.status")
    if status not in FINISHED_STATUSES:
        status = "failed" if any(r.error for r in roots) else "succeeded"
    error = next((r.status_message or _exception(r) or "failed" for r in roots if r.error), "")
    start = min(s.start_ns for s in spans)
    end = max(s.end_ns for s in spans)
    resource = first_span.resource
    llm = [s for s in steps if s.kind == "llm"]
    if "agentlab.run.id" in a:  # ours: the question and answer as the run recorded them
        question, answer = text(a.get("input.value")), text(a.get("output.value"))
    else:
        question = frameworks.question(first_span, steps)
        answer = frameworks.answer(container or last, steps)
    origin = {"format": "otlp", "trace_id": first_span.trace_id,
              "service": str(resource.get("service.name") or ""),
              "project": str(resource.get("openinference.project.name") or ""),
              "scope": first_span.scope, "spans": len(spans),
              **frameworks.framework(spans), "resource": resource}
    if container is not None and "agentlab.run.id" not in a:  # what the run's span held
        origin["root"] = {k: v for k, v in _meta(container, "", False).items()
                          if k not in ("otel.span", "otel.span_id")}
    if any(s.meta.get("otel.content") == "not recorded" for s in steps):
        origin["note"] = NO_CONTENT
    return {
        "agent": None, "agent_name": cut(first_span.name, 200),
        "paradigm": cut(str(a.get("agentlab.run.paradigm") or ""), 50),
        "input": cut(question), "final_answer": cut(answer),
        "status": status, "error": cut(error),
        "agent_snapshot": {"imported_from": origin},
        "llm_calls": len(llm), "tool_calls": sum(s.kind == "tool" for s in steps),
        "tokens_in": sum(s.tokens_in for s in llm), "tokens_out": sum(s.tokens_out for s in llm),
        "cost_usd": sum(s.cost_usd for s in llm), "wall_ms": (end - start) / 1e6,
        "started_at_ns": start, "finished_at_ns": end,
    }


def step_from_span(span: Span, seq: int, parent: int | None) -> Step:
    """The step one span is (its parent's seq given): the live receiver's and the import's."""
    a = span.attributes
    ours = "agentlab.step.kind" in a
    oi_kind = str(a.get("openinference.span.kind") or "").upper()
    kind = a.get("agentlab.step.kind") if ours else None
    if kind not in STEP_KINDS:
        kind = _KINDS.get(oi_kind) or genai.kind(a) or "thought"
    output_text = text(a.get("output.value"))
    if ours:  # an empty role or name was left out
        role, name = a.get("agentlab.step.role", "agent"), a.get("agentlab.step.name", "")
    elif kind == "message":
        role = name = first(a.get("gen_ai.agent.name"), a.get("agent.name"), span.name)
    else:
        role, name = "agent", first(a.get("tool.name"), a.get("gen_ai.tool.name"), span.name)
    step = Step(seq=seq, parent=parent, kind=kind, role=cut(str(role), 100),
                name=cut(str(name or ""), 200), status="error" if span.error else "ok",
                started_at=span.start_ns / 1e9,
                duration_ms=max(span.end_ns - span.start_ns, 0) / 1e6,
                input=parsed(a.get("input.value"), a.get("input.mime_type")),
                text=cut(output_text))
    step.meta = _meta(span, oi_kind, ours)
    if kind == "llm":
        _llm(step, span, ours)
    elif kind == "tool":
        _tool(step, span)
    elif output_text and json_like(a.get("output.mime_type"), output_text):
        step.output = parsed(output_text, "application/json")
    if "agentlab.step.output" in a:  # ours: the step's recorded output
        step.output = parsed(a["agentlab.step.output"], "application/json")
    if span.error and not step.text:
        step.text = cut(span.status_message or _exception(span) or "error")
    return step


def _llm(step: Step, span: Span, ours: bool) -> None:
    a = span.attributes
    raw = step.input
    if (ours and isinstance(raw, dict)) or oi.is_chat_request(raw):
        request = raw  # the request as sent
    else:
        request = oi.request(a) or genai.request(span)
        if request is None and isinstance(raw, list) and oi.is_chat_request({"messages": raw}):
            request = {"messages": raw}
        if raw not in (None, "") and request is not None:
            step.meta["input.value"] = cut(text(a.get("input.value")))  # a framework's own
        request = request or {"messages": []}
    step.input = request
    reply, finish = oi.reply(a), a.get("llm.finish_reason")
    if reply is None:
        reply, reason = genai.reply(span)
        finish = finish or reason
    reply = reply or {}
    content = frameworks.content_text(reply.get("content"))
    calls = [_call(c) for c in reply.get("tool_calls") or [] if isinstance(c, dict)]
    if content or reply:
        if step.text and step.text != content:
            step.meta["output.value"] = step.text  # a framework's own output
        step.text = cut(content)
    recorded = bool(request.get("messages") or content or calls or step.text)
    if not recorded:
        step.text = NO_CONTENT
        step.meta["otel.content"] = "not recorded"
    tokens_in, tokens_out = genai.tokens(a)
    step.tokens_in = count(first(a.get("llm.token_count.prompt"), tokens_in))
    step.tokens_out = count(first(a.get("llm.token_count.completion"), tokens_out))
    step.cost_usd = max(amount(a.get("llm.cost.total")), 0.0)
    model = str(a.get("llm.model_name") or genai.model(a))
    if step.status != "error":
        step.output = {"text": step.text if recorded else "", "model": model,
                       "finish_reason": finish, "tool_calls": calls}
    if model and not ours:
        step.name = cut(model, 200)


def _tool(step: Step, span: Span) -> None:
    a = span.attributes
    if (arguments := frameworks.tool_arguments(step.input)) is not None:
        step.meta["input.value"] = text(a.get("input.value"))
        step.input = arguments
    if step.input is None and "gen_ai.tool.call.arguments" in a:
        step.input = parsed(a["gen_ai.tool.call.arguments"], "application/json")
    if not step.text and "gen_ai.tool.call.result" in a:
        step.text = cut(text(a["gen_ai.tool.call.result"]))
    if step.text and json_like(a.get("output.mime_type"), step.text):
        step.output = parsed(step.text, "application/json")
        if (result := frameworks.tool_result(step.output)) is not None:
            step.text = cut(result)
    if (a.get("gen_ai.operation.name") == "execute_tool" and step.input is None
            and not step.text and not span.error):
        step.text = NO_TOOL_CONTENT
        step.meta["otel.content"] = "not recorded"


def _call(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    raw = str(function.get("arguments") or "")
    args = parsed(raw, "application/json")
    return {"id": str(call.get("id") or ""), "name": str(function.get("name") or ""),
            "arguments": args if isinstance(args, dict) else None, "raw_arguments": raw,
            "error": None}


def _meta(span: Span, oi_kind: str, ours: bool) -> dict[str, Any]:
    a = span.attributes
    meta: dict[str, Any] = {}
    if ours:  # the step's own meta came as JSON
        own = parsed(a.get("metadata"), "application/json")
        meta |= own if isinstance(own, dict) else {}
    meta |= {"otel.span": span.name, "otel.span_id": span.span_id}
    if oi_kind:
        meta["otel.kind"] = oi_kind
    for key, value in a.items():
        if _read(key, ours):
            continue
        meta[key] = value if isinstance(value, str | int | float | bool) else json.dumps(value)
    if not ours and "metadata" in a:
        meta["metadata"] = text(a["metadata"])
    events = []
    for name, when, attrs in span.events:
        if name == "exception":
            meta["exception.type"] = str(attrs.get("exception.type") or "")
            if attrs.get("exception.stacktrace"):
                meta["traceback"] = str(attrs["exception.stacktrace"])
        elif name not in genai.EVENTS:
            events.append({"name": name, "time_ns": when, **attrs} if attrs else
                          {"name": name, "time_ns": when})
    if events:
        meta["otel.events"] = json.dumps(events, ensure_ascii=False, default=str)
    if span.links:
        meta["otel.links"] = json.dumps([{"trace_id": t, "span_id": s, **attrs}
                                         for t, s, attrs in span.links],
                                        ensure_ascii=False, default=str)
    return meta


def _read(key: str, ours: bool) -> bool:
    """Is the attribute read into the step's fields (so not repeated in meta)?"""
    if key in _READ or key.startswith(_READ_PREFIXES):
        return True
    if ours:  # ours: everything under agentlab. and gen_ai. repeats the step's fields
        return key in _OURS or key.startswith(("agentlab.", "gen_ai."))
    return key.startswith("agentlab.")


def _exception(span: Span) -> str:
    return next((str(attrs.get("exception.message") or "") for name, _w, attrs in span.events
                 if name == "exception"), "")


__all__ = ["MAX_TEXT", "NO_CONTENT", "run_from_trace", "step_from_span"]
