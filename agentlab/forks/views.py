"""Replay, fork, resume and the LLM playground (pages under /runs/<id>/).

The views that start runs are async: the new run is created here (who may, and with what, is
decided here) and submitted to the run engine (agentlab.runs.engine: a task of the serving
loop, or a worker's job). ORM work and rendering go through sync_to_async.
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

from agentlab.forks import plans
from agentlab.forks.playground import PARAM_KEYS, reply_text, send
from agentlab.gateway import runner_pages
from agentlab.models import Agent, ModelProfile
from traces.access import Action, run_for
from traces.models import Run, Step


def _get_run(user: Any, pk: int, action: Action = "watch") -> Run:
    return run_for(user, action, pk, Run.objects.select_related("agent"))


def _get_step(run: Run, seq: int) -> Step:
    try:
        return run.steps.get(seq=seq)
    except Step.DoesNotExist:
        raise Http404(f"run {run.pk} has no step {seq}") from None


def _to_run(run: Run) -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("run", args=[run.pk]))


_render = sync_to_async(render)


def _chosen(data: Any) -> tuple[int | None, list[str]]:
    """The agent the user chose for a run whose own agent is not configured here."""
    raw = (data.get("bind_agent") or "").strip()
    if not raw:
        return None, []
    try:
        return int(raw), []
    except ValueError:
        return None, [f"agent: {raw[:40]!r} is not one of the list"]


def _binding(source: Run) -> dict[str, Any]:
    """What the forms say about the agent a run goes live with (or the agents to choose from)."""
    try:
        agent, how = plans.bound_agent(source)
    except plans.NeedsAgent as exc:
        return {"bound": None, "needs_agent": str(exc),
                "agents": list(Agent.objects.order_by("name").only("pk", "name", "paradigm"))}
    return {"bound": agent, "how": how, "needs_agent": "", "agents": []}


async def _choose_agent(request: HttpRequest, source: Run, action: str,
                        errors: list[str]) -> HttpResponse:
    """The page that asks which agent a run without one goes live with (replay, resume)."""
    binding = await sync_to_async(_binding)(source)
    return await _render(request, "forks/bind.html", {
        "run": source, "action": action, "errors": errors, **binding,
        "options": {k: request.POST.get(k, "") for k in ("tools", "agent")},
        "chosen": request.POST.get("bind_agent", ""),
    }, status=400 if errors or not binding["agents"] else 200)


async def _go_live(request: HttpRequest, source: Run, action: str, **options: Any
                   ) -> HttpResponse:
    chosen, errors = _chosen(request.POST)
    if errors:
        return await _choose_agent(request, source, action, errors)
    user = await request.auser()
    start = plans.replay_run if action == "replay" else plans.resume_run
    try:
        new = await start(source, user, chosen=chosen, **options)
    except plans.NeedsAgent:
        return await _choose_agent(request, source, action, [])
    except plans.ForkError as exc:
        if chosen is not None:  # shown beside the choice, which the user may change
            return await _choose_agent(request, source, action, [str(exc)])
        await sync_to_async(messages.error)(request, str(exc))
        return _to_run(source)
    return _to_run(new)


@require_POST
async def replay(request: HttpRequest, pk: int) -> HttpResponse:
    source = await sync_to_async(_get_run)(await request.auser(), pk, "fork")
    if runner_pages.is_gateway(source):  # the person's own program: their runner replays it
        return await sync_to_async(runner_pages.replay)(request, source)
    return await _go_live(request, source, "replay", tools=request.POST.get("tools", "recorded"),
                          agent=request.POST.get("agent", "current"))


@require_POST
async def resume(request: HttpRequest, pk: int) -> HttpResponse:
    source = await sync_to_async(_get_run)(await request.auser(), pk)
    return await _go_live(request, source, "resume")


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
    source = await sync_to_async(_get_run)(user, pk, "fork")
    step = await sync_to_async(_get_step)(source, seq)
    if runner_pages.is_gateway(source):  # the person's own program: their runner forks it
        return await sync_to_async(runner_pages.fork)(request, source, step)
    values, errors = _fork_form(step), []
    if request.method == "POST":
        edits, errors = _fork_edits(step, request.POST)
        chosen, choice_errors = _chosen(request.POST)
        errors += choice_errors
        if not errors:
            try:
                new = await plans.fork_run(source, user, seq, chosen=chosen, **edits)
            except plans.NeedsAgent:
                errors = ["agent: choose the agent this fork runs with"]
            except plans.ForkError as exc:
                errors = [str(exc)]
            else:
                return _to_run(new)
        values = {k: request.POST.get(k, v) for k, v in values.items()}
    editable = step.kind in ("tool", "llm")
    binding = await sync_to_async(_binding)(source)
    return await _render(request, "forks/fork.html", {
        "run": source, "step": step, "values": values, "errors": errors, "editable": editable,
        "chosen": request.POST.get("bind_agent", ""), **binding,
    }, status=400 if errors else 200)


# ------------------------------------------------------------------ playground


def _playground_page(user: Any, pk: int, seq: int) -> tuple[Run, Step, list[ModelProfile]]:
    run = _get_run(user, pk)
    step = _get_step(run, seq)
    if step.kind != "llm":
        raise Http404(f"step {seq} is a {step.kind} step, not an LLM call")
    return run, step, list(ModelProfile.objects.order_by("name"))


def _recorded_values(step: Step) -> dict[str, str]:
    """The form's first values: the recorded request (an imported step may hold anything)."""
    recorded = step.input if isinstance(step.input, dict) else {}
    messages = recorded.get("messages")
    profile = (step.meta or {}).get("profile") if isinstance(step.meta, dict) else ""
    return {
        "messages": json.dumps(messages if isinstance(messages, list) else [], indent=2,
                               ensure_ascii=False),
        "params": json.dumps({k: recorded.get(k) for k in PARAM_KEYS
                              if recorded.get(k) is not None}, indent=2, ensure_ascii=False),
        "profile": profile if isinstance(profile, str) else "",
    }


async def playground(request: HttpRequest, pk: int, seq: int) -> HttpResponse:
    user = await request.auser()
    run, step, profiles = await sync_to_async(_playground_page)(user, pk, seq)
    values = _recorded_values(step)
    errors: list[str] = []
    result = None
    if request.method == "POST":
        values = {k: request.POST.get(k, "") for k in values}
        result, errors = await send(values, profiles)
    recorded = step.output if isinstance(step.output, dict) else {}
    return await _render(request, "forks/playground.html", {
        "run": run, "step": step, "profiles": profiles, "values": values, "errors": errors,
        "recorded": recorded, "result": result.to_dict() if result else None,
        # "Add to playground cases" (the step's link opens it): what the saved case starts as
        "save_open": "save" in request.GET, "case": save_defaults(run, step),
    }, status=400 if errors else 200)


def save_defaults(run: Run, step: Step) -> dict[str, str]:
    """The save form's first values: a name from the run's question, the recorded reply."""
    question = " ".join(str(run.input or "").split())
    name = f"Run {run.pk} step {step.seq}" + (f": {question}" if question else "")
    return {"name": name[:120], "expected": reply_text(step.output), "tags": ""}
