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

from collections.abc import Mapping
from typing import Any

from traces.otel import calls, fields, frameworks, genai, kept
from traces.otel import openinference as oi
from traces.otel.decode import Span
from traces.otel.fields import NO_CONTENT, NO_TOOL_CONTENT
from traces.otel.values import MAX_TEXT, amount, count, cut, first, json_like, parsed, text
from traces.schema import STEP_KINDS, Step

_KINDS = {"LLM": "llm", "TOOL": "tool", "RETRIEVER": "tool", "RERANKER": "tool",
          "EMBEDDING": "tool", "EVALUATOR": "evaluation", "GUARDRAIL": "guardrail",
          "AGENT": "message"}
_CONTAINERS = ("AGENT", "CHAIN")


def run_from_trace(spans: list[Span], known: Mapping[str, Step] | None = None,
                   ) -> tuple[dict[str, Any], list[Step]]:
    """(Run fields, steps) of one trace's spans. `known`: steps already made of some of them
    by `step_from_span` (the live receiver's, by span id), taken instead of made again: a
    step is its span's whatever its seq and parent, which are set here."""
    by_id = {s.span_id: s for s in spans}
    children: dict[str, list[Span]] = {}
    roots = []
    for s in spans:
        if s.parent_id and s.parent_id in by_id and s.parent_id != s.span_id:
            children.setdefault(s.parent_id, []).append(s)
        else:
            roots.append(s)
    roots.sort(key=lambda s: s.start_ns)
    container = roots[0] if len(roots) == 1 and is_container(roots[0]) else None
    top = sorted(children.get(container.span_id, []), key=lambda s: s.start_ns) \
        if container else roots
    main = container or roots[0]
    steps: list[Step] = []
    stack = [(s, None) for s in reversed(top)]
    seen: set[str] = set()
    called: set[int] = set()  # seqs of the spans that record a model call themselves
    while stack:  # depth first, children by start time; a cycle is cut where it closes
        span, parent = stack.pop()
        if span.span_id in seen:
            continue
        seen.add(span.span_id)
        made = known.get(span.span_id) if known else None
        step = (_renumbered(made, len(steps) + 1, parent) if made is not None
                else step_from_span(span, len(steps) + 1, parent))
        kept.where(step, span, main)
        if step.kind == "llm" and calls.records_call(span):  # only llm steps are demoted
            called.add(step.seq)
        steps.append(step)
        kids = sorted(children.get(span.span_id, []), key=lambda s: s.start_ns)
        stack.extend((k, step.seq) for k in reversed(kids))
    calls.demote(steps, called)
    frameworks.restore_arguments(steps)
    error = next((e for r in roots if (e := fields.root_error(r))), "")
    return fields.run_fields(container, roots[0], roots[-1], error,
                             fields.gather(spans, steps)), steps


def _renumbered(step: Step, seq: int, parent: int | None) -> Step:
    """A copy of a live step in its place in the whole run: shallow, like
    dataclasses.replace but without its call of __init__ (a few µs a step, thousands a
    request); its own meta, which the whole read changes."""
    out = Step.__new__(Step)
    out.__dict__ = {**step.__dict__, "seq": seq, "parent": parent, "meta": dict(step.meta)}
    return out


def is_container(span: Span) -> bool:
    """Is this root span the run itself (an agent's or chain's span, or Agent Lab's run)?"""
    a = span.attributes
    return ("agentlab.run.id" in a or a.get("openinference.span.kind") in _CONTAINERS
            or genai.is_container(a))


def step_from_span(span: Span, seq: int, parent: int | None) -> Step:
    """The step one span is (its parent's seq given): the live receiver's and the import's."""
    a = span.attributes
    ours = "agentlab.step.kind" in a
    oi_kind = str(a.get("openinference.span.kind") or "").upper()
    kind = kind_of(span)
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
    step.meta = kept.meta(span, oi_kind, ours)
    if kind == "llm":
        _llm(step, span, ours)
    elif kind == "tool":
        _tool(step, span)
    elif output_text and json_like(a.get("output.mime_type"), output_text):
        step.output = parsed(output_text, "application/json")
    if "agentlab.step.output" in a:  # ours: the step's recorded output
        step.output = parsed(a["agentlab.step.output"], "application/json")
    if span.error and not step.text:
        step.text = cut(span.status_message or kept.exception(span) or "error")
    return step


def kind_of(span: Span) -> str:
    """The kind of step a span is (before calls.demote)."""
    a = span.attributes
    kind = a.get("agentlab.step.kind") if "agentlab.step.kind" in a else None
    if kind not in STEP_KINDS:
        oi_kind = str(a.get("openinference.span.kind") or "").upper()
        # OpenInference's kind where the span has one (a CHAIN stays a thought), else GenAI's
        kind = _KINDS.get(oi_kind) or (None if oi_kind else genai.kind(a)) or "thought"
    return kind


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
    asked = [_call(c) for c in reply.get("tool_calls") or [] if isinstance(c, dict)]
    if content or reply:
        if step.text and step.text != content:
            step.meta["output.value"] = step.text  # a framework's own output
        step.text = cut(content)
    recorded = bool(request.get("messages") or content or asked or step.text)
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
                       "finish_reason": finish, "tool_calls": asked}
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


__all__ = ["MAX_TEXT", "NO_CONTENT", "run_from_trace", "step_from_span"]
