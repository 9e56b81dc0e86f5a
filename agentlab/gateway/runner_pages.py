"""Replay and fork of a gateway run from its run page: asked here, run by the person's runner.

A gateway run was made by the person's own program, which only they can start: the page
cannot run it, so "Replay" and "Fork from here" (agentlab/forks/views.py hands a gateway run
here) make a session waiting for a runner (GatewaySession.for_runner) that `manage.py attach
--serve` in their terminal takes (launcher_views.next_job). The job's page says it went to
their runner when one asked for work within RUNNER_FRESH_S, else shows the exact command to
paste: nothing is executed with the server's authority.
"""

from __future__ import annotations

import json
import shlex
from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from agentlab.gateway.models import (
    GatewayRunner,
    GatewaySession,
    SessionLimit,
    ensure_session_room,
)
from traces.models import Run, Step

RUNNER_FRESH_S = 60  # a runner long-polls every ~25 s: one silent this long is gone
BUSY_S = 30 * 60  # …unless it is running a request it took this recently
NAME_CHARS = 200  # GatewaySession.name: a longer command line was cut, not pasteable
QUESTION = "{question}"


def is_gateway(run: Run) -> bool:
    """Made by a program through the gateway (its snapshot says so: runs.start.gateway_run)."""
    return isinstance(run.agent_snapshot, dict) and "gateway" in run.agent_snapshot


# ------------------------------------------------------------------ asking for a job


def replay(request: HttpRequest, source: Run) -> HttpResponse:
    on = request.POST.get("on_divergence", "live")
    try:
        row = _job(request.user, source, mode="replay",
                   on_divergence=on if on in ("live", "stop") else "live")
    except SessionLimit as exc:
        messages.error(request, str(exc))
        return HttpResponseRedirect(reverse("run", args=[source.pk]))
    return HttpResponseRedirect(reverse("gateway_job", args=[row.key]))


def fork(request: HttpRequest, source: Run, step: Step) -> HttpResponse:
    """GET: the edit form of an llm or tool step; POST: the job, then its page."""
    values, errors = form_values(step), []
    if request.method == "POST":
        edit, errors = edit_from(step, request.POST)
        if not errors:
            try:
                row = _job(request.user, source, mode="fork", fork_seq=step.seq, edit=edit)
            except SessionLimit as exc:
                errors = [str(exc)]
            else:
                return HttpResponseRedirect(reverse("gateway_job", args=[row.key]))
        values = {k: request.POST.get(k, v) for k, v in values.items()}
    return render(request, "gateway/fork.html", {
        "run": source, "step": step, "values": values, "errors": errors,
        "editable": step.kind in ("llm", "tool"), "gateway": True,
    }, status=400 if errors else 200)


def _job(user: Any, source: Run, **fields: Any) -> GatewaySession:
    ensure_session_room(user)
    return GatewaySession.objects.create(
        user=user, for_runner=True, source=source, question=source.input or "",
        name=f"from run {source.pk}'s page", **fields)


def form_values(step: Step) -> dict[str, str]:
    output = step.output if isinstance(step.output, dict) else {}
    calls = [{"name": c.get("name"), "arguments": c.get("arguments") or {}}
             for c in output.get("tool_calls") or [] if isinstance(c, dict)]
    return {"observation": str(output.get("observation", step.text or "")),
            "text": str(output.get("text") or ""),
            "tool_calls": json.dumps(calls, indent=2, ensure_ascii=False) if calls else ""}


def edit_from(step: Step, data: Any) -> tuple[dict[str, Any], list[str]]:
    """The session's edit from the form ({"observation"} or {"response"}), or what is wrong."""
    if step.kind not in ("llm", "tool"):
        return {}, [f"a {step.kind} step is not one the program sent: fork from an LLM call "
                    "or a tool result"]
    value = {k: str(data.get(k, "")).replace("\r\n", "\n") for k in ("observation", "text",
                                                                     "tool_calls")}
    if step.kind == "tool":
        return {"observation": value["observation"]}, []
    raw = value["tool_calls"].strip()
    try:
        calls = json.loads(raw) if raw else []
    except json.JSONDecodeError as exc:
        return {}, [f"tool calls: not valid JSON ({exc})"]
    if not isinstance(calls, list) or not all(
            isinstance(c, dict) and isinstance(c.get("name"), str) and c["name"]
            for c in calls):
        return {}, ['tool calls: give a list like [{"name": "get_weather", '
                    '"arguments": {"city": "Paris"}}]']
    response: dict[str, Any] = {"text": value["text"]}
    if calls:
        response["tool_calls"] = [{"name": c["name"], "arguments": c.get("arguments") or {}}
                                  for c in calls]
    return {"response": response}, []


# ------------------------------------------------------------------ the job's page


def job(request: HttpRequest, key: str) -> HttpResponse:
    """Where a replay or fork asked from a page stands; POST withdraws one not yet taken."""
    row = GatewaySession.objects.filter(key=key, user=request.user,
                                        for_runner=True).select_related("source").first()
    if row is None:
        raise Http404("no such request of yours")
    if request.method == "POST" and row.taken_at is None:
        now = timezone.now()
        GatewaySession.objects.filter(pk=row.pk, taken_at__isnull=True).update(
            taken_at=now, ended_at=now)
        return HttpResponseRedirect(reverse("run", args=[row.source_id]) if row.source_id
                                    else reverse("runs"))
    program = recorded_program(row.source) if row.source is not None else None
    context = {"job": row, "runner": runner_listening(request.user),
               "command": paste_command(row, program or placeholder(row.question)),
               "serve_command": serve_command(program, row.question),
               "known_program": program is not None,
               "withdrawn": row.ended_at is not None and row.run_id is None,
               "part": "part" in request.GET}
    template = "gateway/job.html#status" if context["part"] else "gateway/job.html"
    return render(request, template, context)



def runner_listening(user: Any) -> bool:
    """A runner of the user's asked for work lately, or is running a request (it polls
    again when that program ends)."""
    now = timezone.now()
    return (GatewayRunner.objects.filter(
        user=user, polled_at__gte=now - timedelta(seconds=RUNNER_FRESH_S)).exists()
        or GatewaySession.objects.filter(
            user=user, for_runner=True, taken_at__gte=now - timedelta(seconds=BUSY_S),
            ended_at__isnull=True).exists())


def recorded_program(run: Run) -> list[str] | None:
    """The command line the run's program was started with under `attach` (its session's
    name), when it was kept whole; else None."""
    key = ((run.agent_snapshot or {}).get("gateway") or {}).get("session")
    row = GatewaySession.objects.filter(key=key).only("name", "for_runner").first() if key \
        else None
    if row is None or row.for_runner or not row.name or len(row.name) >= NAME_CHARS:
        return None
    try:
        return shlex.split(row.name) or None
    except ValueError:
        return None


def placeholder(question: str) -> list[str]:
    return ["python", "my_agent.py", question]


def paste_command(row: GatewaySession, program: list[str]) -> str:
    """`python manage.py attach --fork 12 --at 3 --observation '…' -- python my_agent.py …`"""
    parts = ["python", "manage.py", "attach"]
    if row.mode == "replay":
        parts += ["--replay", str(row.source_id)]
        if row.on_divergence == "stop":
            parts += ["--on-divergence", "stop"]
    else:
        parts += ["--fork", str(row.source_id), "--at", str(row.fork_seq)]
        edit = row.edit or {}
        if "observation" in edit:
            parts += ["--observation", str(edit["observation"])]
        elif isinstance(edit.get("response"), dict):
            response = edit["response"]
            parts += ["--response", str(response.get("text") or "")]
            if response.get("tool_calls"):
                parts += ["--tool-calls", json.dumps(response["tool_calls"],
                                                     ensure_ascii=False)]
    return shlex.join([*parts, "--", *program])


def serve_command(program: list[str] | None, question: str) -> str:
    """The runner for this program: its question argument becomes {question}."""
    template = [QUESTION if part == question else part
                for part in (program or placeholder(question))]
    if QUESTION not in template:
        template.append(QUESTION)
    return shlex.join(["python", "manage.py", "attach", "--serve", "--", *template])
