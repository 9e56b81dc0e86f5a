"""Replay, fork, resume and the LLM playground (pages under /runs/<id>/).

The views that start runs are async: a run is an asyncio task of the serving loop (daphne's),
created by agentlab.runs.tasks.launch. ORM work and rendering go through sync_to_async.
"""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST

from agentlab.forks import plans as forks
from agentlab.llm.client import OpenAIChatModel
from agentlab.llm.errors import LLMError
from agentlab.models import ModelProfile
from agentlab.profiles import to_config
from traces.access import visible_run
from traces.models import Run, Step

PARAM_KEYS = ("tools", "tool_choice", "response_format", "stop", "temperature", "max_tokens")


def _get_run(user: Any, pk: int) -> Run:
    return visible_run(user, pk, Run.objects.select_related("agent"))


def _get_step(run: Run, seq: int) -> Step:
    try:
        return run.steps.get(seq=seq)
    except Step.DoesNotExist:
        raise Http404(f"run {run.pk} has no step {seq}") from None


def _to_run(run: Run) -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("run", args=[run.pk]))


_render = sync_to_async(render)


@require_POST
async def replay(request: HttpRequest, pk: int) -> HttpResponse:
    user = await request.auser()
    source = await sync_to_async(_get_run)(user, pk)
    try:
        new = await forks.replay_run(source, user, tools=request.POST.get("tools", "recorded"),
                                     agent=request.POST.get("agent", "current"))
    except forks.ForkError as exc:
        await sync_to_async(messages.error)(request, str(exc))
        return _to_run(source)
    return _to_run(new)


@require_POST
async def resume(request: HttpRequest, pk: int) -> HttpResponse:
    user = await request.auser()
    source = await sync_to_async(_get_run)(user, pk)
    try:
        new = await forks.resume_run(source, user)
    except forks.ForkError as exc:
        await sync_to_async(messages.error)(request, str(exc))
        return _to_run(source)
    return _to_run(new)


# ------------------------------------------------------------------ fork from a step


def _fork_form(step: Step) -> dict[str, str]:
    """The editable parts of a step as the form shows them."""
    output = step.output if isinstance(step.output, dict) else {}
    calls = _calls(output.get("tool_calls") or [])
    return {"observation": str(output.get("observation", step.text)),
            "text": str(output.get("text") or ""),
            "tool_calls": json.dumps(calls, indent=2, ensure_ascii=False) if calls else ""}


def _calls(raw: list[Any]) -> list[dict[str, Any]]:
    return [{"name": c.get("name"), "arguments": c.get("arguments") or {}} for c in raw]


def _fork_edits(step: Step, data: Any) -> tuple[dict[str, Any], list[str]]:
    """The user's edit of a step (only what differs from the record) as plan_fork's keyword
    arguments, or the problems with it."""
    original = _fork_form(step)

    def field(name: str) -> str:  # browsers send textarea lines ending in CRLF
        return data.get(name, original[name]).replace("\r\n", "\n")

    if step.kind == "tool" and field("observation") != original["observation"]:
        return {"edited_observation": field("observation")}, []
    if step.kind != "llm":
        return {}, []
    raw = field("tool_calls").strip()
    try:
        calls = json.loads(raw) if raw else []
    except json.JSONDecodeError as exc:
        return {}, [f"tool calls: not valid JSON ({exc})"]
    if not isinstance(calls, list) or not all(
            isinstance(c, dict) and isinstance(c.get("name"), str) for c in calls):
        return {}, ['tool calls: give a list like [{"name": "calculator", '
                    '"arguments": {"expression": "6*7"}}]']
    recorded = step.output.get("tool_calls") if isinstance(step.output, dict) else None
    if field("text") == original["text"] and _calls(calls) == _calls(recorded or []):
        return {}, []
    reply = {"text": field("text"), "finish_reason": "tool_calls" if calls else "stop",
             "tool_calls": [{"name": c["name"], "arguments": c.get("arguments") or {},
                             "id": c.get("id") or f"call_{i}"} for i, c in enumerate(calls)]}
    return {"edited_reply": reply}, []


async def fork(request: HttpRequest, pk: int, seq: int) -> HttpResponse:
    user = await request.auser()
    source = await sync_to_async(_get_run)(user, pk)
    step = await sync_to_async(_get_step)(source, seq)
    values, errors = _fork_form(step), []
    if request.method == "POST":
        edits, errors = _fork_edits(step, request.POST)
        if not errors:
            try:
                new = await forks.fork_run(source, user, seq, **edits)
            except forks.ForkError as exc:
                errors = [str(exc)]
            else:
                return _to_run(new)
        values = {k: request.POST.get(k, v) for k, v in values.items()}
    editable = step.kind in ("tool", "llm")
    return await _render(request, "forks/fork.html", {
        "run": source, "step": step, "values": values, "errors": errors, "editable": editable,
    }, status=400 if errors else 200)


# ------------------------------------------------------------------ playground


def _parse_json(label: str, raw: str, kind: type, errors: list[str]) -> Any:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        errors.append(f"{label}: not valid JSON ({exc})")
        return None
    if not isinstance(value, kind):
        errors.append(f"{label}: must be a JSON {'list' if kind is list else 'object'}")
        return None
    return value


def _playground_request(data: Any) -> tuple[list | None, dict | None, list[str]]:
    errors: list[str] = []
    msgs = _parse_json("messages", data.get("messages", ""), list, errors)
    params = _parse_json("parameters", data.get("params", "") or "{}", dict, errors)
    if msgs is not None and not all(isinstance(m, dict) and "role" in m for m in msgs):
        errors.append('messages: every message must be an object with a "role"')
    if params is not None and (unknown := sorted(set(params) - set(PARAM_KEYS))):
        errors.append(f"parameters: unknown key(s) {', '.join(unknown)}; "
                      f"allowed: {', '.join(PARAM_KEYS)}")
    return msgs, params, errors


def _playground_page(user: Any, pk: int, seq: int) -> tuple[Run, Step, list[ModelProfile]]:
    run = _get_run(user, pk)
    step = _get_step(run, seq)
    if step.kind != "llm":
        raise Http404(f"step {seq} is a {step.kind} step, not an LLM call")
    return run, step, list(ModelProfile.objects.order_by("name"))


async def playground(request: HttpRequest, pk: int, seq: int) -> HttpResponse:
    user = await request.auser()
    run, step, profiles = await sync_to_async(_playground_page)(user, pk, seq)
    recorded = step.input if isinstance(step.input, dict) else {}
    values = {
        "messages": json.dumps(recorded.get("messages") or [], indent=2, ensure_ascii=False),
        "params": json.dumps({k: recorded.get(k) for k in PARAM_KEYS
                              if recorded.get(k) is not None}, indent=2, ensure_ascii=False),
        "profile": (step.meta or {}).get("profile") or "",
    }
    errors: list[str] = []
    result = None
    if request.method == "POST":
        values = {k: request.POST.get(k, "") for k in values}
        msgs, params, errors = _playground_request(request.POST)
        profile = next((p for p in profiles if p.name == values["profile"]), None)
        if profile is None:
            errors.append(f"model profile: choose one of {', '.join(p.name for p in profiles)}")
        if not errors:
            try:
                config = await sync_to_async(to_config)(profile)
                result = await OpenAIChatModel(config).chat(msgs, **params)
            except LLMError as exc:
                errors.append(f"the model call failed: {exc}")
            except TypeError as exc:  # e.g. a parameter of the wrong type
                errors.append(f"parameters: {exc}")
    return await _render(request, "forks/playground.html", {
        "run": run, "step": step, "profiles": profiles, "values": values, "errors": errors,
        "recorded": step.output if isinstance(step.output, dict) else {},
        "result": result.to_dict() if result else None,
    }, status=400 if errors else 200)
