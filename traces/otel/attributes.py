"""OpenInference attributes of a run's spans (pure), with the GenAI conventions' beside them
(traces.otel.genai_attributes). The table is docs/INTEROP.md's.

Values are str, bool, int or float (what OTLP carries); objects are JSON text.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from traces.otel import genai_attributes as genai
from traces.otel import ids
from traces.schema import Step

_INVOCATION_KEYS = ("temperature", "max_tokens", "stop", "tool_choice", "response_format")
# llm.provider by the endpoint's host (OpenInference's values); elsewhere (a local server,
# an unknown host) no provider is claimed, so no peer prices the call as if it were one.
_PROVIDERS = (("api.openai.com", "openai"), ("openai.azure.com", "azure"),
              ("anthropic.com", "anthropic"), ("mistral.ai", "mistralai"),
              ("groq.com", "groq"), ("deepseek.com", "deepseek"), ("x.ai", "xai"),
              ("together.xyz", "together"), ("fireworks.ai", "fireworks"),
              ("googleapis.com", "google"), ("cohere.com", "cohere"))


@dataclass
class Context:
    """What one step's attributes need from the rest of the run."""

    profiles: dict[str, Any] = field(default_factory=dict)
    tool_schemas: dict[str, dict[str, Any]] = field(default_factory=dict)
    call_ids: dict[int, str] = field(default_factory=dict)  # tool step seq -> its call's id
    calls: deque[tuple[str, str]] = field(default_factory=deque)  # (name, id) not answered yet

    @classmethod
    def of(cls, steps: list[Step], profiles: dict[str, Any]) -> Context:
        context = cls(profiles=profiles)
        context.learn(steps)
        return context

    def learn(self, steps: list[Step]) -> None:
        """Tool schemas from the requests, and each tool step's call id: the first call of
        that name in an earlier reply not answered yet (steps in seq order, in one call or
        as they finish)."""
        pending = self.calls
        for step in sorted(steps, key=lambda s: s.seq):
            if step.kind == "llm":
                request = step.input if isinstance(step.input, dict) else {}
                for tool in request.get("tools") or []:
                    function = tool.get("function") if isinstance(tool, dict) else None
                    if isinstance(function, dict) and function.get("name"):
                        self.tool_schemas[str(function["name"])] = function
                reply = step.output if isinstance(step.output, dict) else {}
                pending.extend((str(c.get("name")), str(c.get("id"))) for c in
                               reply.get("tool_calls") or [] if isinstance(c, dict) and c.get("id"))
            elif step.kind == "tool":
                match = next((p for p in pending if p[0] == step.name), None)
                if match is not None:
                    pending.remove(match)
                    self.call_ids[step.seq] = match[1]

    def profile(self, step: Step) -> dict[str, Any]:
        name = (step.meta or {}).get("profile")
        for p in self.profiles.values():
            if isinstance(p, dict) and name and p.get("name") == name:
                return p
        p = self.profiles.get(step.role) or self.profiles.get("default")
        return p if isinstance(p, dict) else {}


def root(info: Any) -> dict[str, Any]:
    """The run's own span (`info`: a traces.otel.spans.RunInfo)."""
    totals = info.totals
    attrs = {"openinference.span.kind": "AGENT", "agent.name": info.agent_name,
             **io("input", info.input), **io("output", info.final_answer),
             "agentlab.run.id": info.pk, "agentlab.run.status": info.status,
             "agentlab.run.paradigm": info.paradigm,
             "metadata": js({"run_id": info.pk, "paradigm": info.paradigm,
                             "status": info.status, **totals,
                             "installation": ids.installation_id()})}
    attrs |= genai.agent(info.agent_name, info.input, info.final_answer)
    if info.paradigm:
        attrs["tag.tags"] = [info.paradigm]  # a list attribute, as OpenInference has it
    if info.user_id:
        attrs["user.id"] = info.user_id
    if info.session_id:
        attrs["session.id"] = info.session_id
    return attrs


# OpenInference span kinds of the steps that have one of their own (the rest are CHAIN).
OI_KINDS = {"evaluation": "EVALUATOR", "guardrail": "GUARDRAIL"}


def step(step: Step, context: Context, *, sub_run: bool) -> tuple[dict[str, Any], str]:
    """The attributes and the name of a step's span."""
    attrs: dict[str, Any] = {"agentlab.step.seq": step.seq, "agentlab.step.kind": step.kind,
                             "agentlab.step.role": step.role, "agentlab.step.name": step.name,
                             "agentlab.step.status": step.status}
    if step.kind == "llm":
        attrs |= _llm(step, context)
        name = f"llm {attrs.get('llm.model_name') or step.role}"
    elif step.kind == "tool":
        attrs |= _tool(step, context)
        name = step.name or "tool"
    else:
        kind = "AGENT" if sub_run else OI_KINDS.get(step.kind, "CHAIN")
        attrs |= {"openinference.span.kind": kind, **io("input", step.input),
                  **io("output", step.output if step.output is not None else step.text)}
        if sub_run:
            attrs["agent.name"] = step.role if step.role != "agent" else step.name or step.kind
            attrs |= genai.agent(attrs["agent.name"])
        name = f"{step.kind} {step.name}".strip()
    if step.meta:
        attrs["metadata"] = js(step.meta)
    if step.output is not None and attrs.get("output.value") not in (step.output,
                                                                      js(step.output)):
        attrs["agentlab.step.output"] = js(step.output)  # the record, for an import here
    return {k: v for k, v in attrs.items() if v is not None and v != ""}, name


def _llm(step: Step, context: Context) -> dict[str, Any]:
    request = step.input if isinstance(step.input, dict) else {}
    failed = step.status == "error"
    reply = step.output if isinstance(step.output, dict) and not failed else {}
    profile = context.profile(step)
    # A failed call has no reply: its model is the profile's, never the profile's name.
    model = reply.get("model") or (profile.get("model") if failed or not reply else None)
    attrs: dict[str, Any] = {
        "openinference.span.kind": "LLM", "llm.model_name": model or None,
        "llm.system": "openai",  # every call goes through the openai SDK's API shape
        "llm.provider": provider(profile.get("base_url") or ""),
        "llm.token_count.prompt": step.tokens_in,
        "llm.token_count.completion": step.tokens_out,
        "llm.token_count.total": step.tokens_in + step.tokens_out,
        "llm.invocation_parameters": js({k: request[k] for k in _INVOCATION_KEYS
                                         if request.get(k) is not None}),
        "llm.finish_reason": reply.get("finish_reason"),
        **io("input", request or step.input),
    }
    attrs |= _cost(step, profile)
    attrs |= genai.llm(step, model or None, attrs["llm.provider"])
    if not failed:
        attrs |= io("output", step.text)
    for i, message in enumerate(request.get("messages") or []):
        attrs |= message_attrs(f"llm.input_messages.{i}.message", message)
    for i, tool in enumerate(request.get("tools") or []):
        attrs[f"llm.tools.{i}.tool.json_schema"] = js(tool)
    if reply or (step.text and not failed):
        out = {"role": "assistant", "content": reply.get("text", step.text),
               "tool_calls": [{"id": c.get("id"), "function": {
                   "name": c.get("name"), "arguments": c.get("raw_arguments", "")}}
                   for c in reply.get("tool_calls") or [] if isinstance(c, dict)]}
        attrs |= message_attrs("llm.output_messages.0.message", out)
    return attrs


def _cost(step: Step, profile: dict[str, Any]) -> dict[str, Any]:
    total = float(step.cost_usd or 0)
    price_in = float(profile.get("price_in_per_m") or 0)
    price_out = float(profile.get("price_out_per_m") or 0)
    prompt, completion = step.tokens_in * price_in / 1e6, step.tokens_out * price_out / 1e6
    if total and abs(prompt + completion - total) > 1e-9:  # priced by a fallback: total only
        return {"llm.cost.total": total}
    return {"llm.cost.prompt": prompt, "llm.cost.completion": completion,
            "llm.cost.total": total or prompt + completion}


def _tool(step: Step, context: Context) -> dict[str, Any]:
    schema = context.tool_schemas.get(step.name, {})
    return {**genai.tool(step, context.call_ids.get(step.seq), schema.get("description")),
            "openinference.span.kind": "TOOL", "tool.name": step.name,
            "tool.id": context.call_ids.get(step.seq),
            "tool.description": schema.get("description"),
            "tool.parameters": js(schema["parameters"]) if "parameters" in schema else None,
            **io("input", step.input), **io("output", step.text or step.output)}


def provider(base_url: str) -> str | None:
    host = (urlsplit(base_url).hostname or "").lower()
    return next((name for suffix, name in _PROVIDERS if host == suffix
                 or host.endswith("." + suffix)), None)


def message_attrs(prefix: str, message: Any) -> dict[str, Any]:
    if not isinstance(message, dict):
        return {f"{prefix}.content": text(message)}
    attrs = {f"{prefix}.role": str(message.get("role", "")),
             f"{prefix}.content": text(message.get("content"))}
    if message.get("name"):
        attrs[f"{prefix}.name"] = str(message["name"])
    if message.get("tool_call_id"):
        attrs[f"{prefix}.tool_call_id"] = str(message["tool_call_id"])
    for j, call in enumerate(message.get("tool_calls") or []):
        function = (call.get("function") or {}) if isinstance(call, dict) else {}
        base = f"{prefix}.tool_calls.{j}.tool_call"
        if isinstance(call, dict) and call.get("id"):
            attrs[f"{base}.id"] = str(call["id"])
        attrs[f"{base}.function.name"] = str(function.get("name", ""))
        attrs[f"{base}.function.arguments"] = text(function.get("arguments"))
    return attrs


def exception_event(kind: str, message: str, when_ns: int,
                    stacktrace: str = "") -> tuple[str, int, dict[str, Any]]:
    attrs = {"exception.type": kind, "exception.message": message[:4000]}
    if stacktrace:
        attrs["exception.stacktrace"] = stacktrace
    return ("exception", when_ns, attrs)


def step_exception(step: Step, when_ns: int) -> tuple[str, int, dict[str, Any]]:
    output = step.output if isinstance(step.output, dict) else {}
    meta = step.meta or {}
    kind = output.get("kind") or meta.get("error_type") or f"{step.kind} error"
    return exception_event(str(kind), step.text or step.kind, when_ns,
                           str(meta.get("traceback") or ""))


def io(which: str, value: Any) -> dict[str, Any]:
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        return {f"{which}.value": value, f"{which}.mime_type": "text/plain"}
    return {f"{which}.value": js(value), f"{which}.mime_type": "application/json"}


def text(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else js(value))


def js(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
