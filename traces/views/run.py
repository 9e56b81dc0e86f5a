"""One run: header, timeline, steps (paged), payloads and messages on demand."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from traces import access
from traces.display import highlight as hl
from traces.display import labels
from traces.display.view import StepView
from traces.hooks import hook
from traces.models import Run, Step
from traces.owners import RECEIVED
from traces.views import steps as loader
from traces.views.find import KINDS as FIND_KINDS
from traces.views.timeline import timeline_context

PAYLOAD_FIELDS = ("input", "output", "text")


def visible_run(request: HttpRequest, pk: int) -> Run:
    """The run of a trace page (its chat history is not shown: left in the database)."""
    return access.visible_run(request.user, pk, Run.objects.defer("history"))


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except ValueError:
        return None


def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = visible_run(request, pk)
    last = loader.last_seq(run)
    current = _int(request.GET.get("step"))
    current = min(max(current, 1), last) if current is not None and last else None
    views, before = window(run, current)
    with_feedback(request, run, views)
    visible = Run.objects.visible_to(request.user)
    context = {
        "run": run, "steps": views, "last_seq": last, "current": current,
        "prev_before": before, "find_kinds": FIND_KINDS,
        "scores": labels.scores(run.pk),
        "feedback": run_feedback(request, run),
        "guardrail_steps": guardrail_steps(run),
        "next_after": _next_after(views, last),
        "profiles": _profiles(run.agent_snapshot),
        "origin": origin(run.agent_snapshot),
        **timeline_context(run, last),
        "parent": visible.filter(pk=run.parent_run_id).only("pk", "input").first()
        if run.parent_run_id else None,
        "forks": list(visible.filter(parent_run=run).only("pk", "fork_seq", "status")
                      .order_by("pk")[:20]),
        # A received run (the OTLP receiver) is live but nothing here executes it: no controls.
        "received": _received(run),
        "gateway": gateway(run),
        "linked": linked(visible, run),
        **cases_context(request.user, run.pk),
    }
    return render(request, "traces/run_detail.html", context)


def window(run: Run, current: int | None) -> tuple[list[StepView], dict[str, Any] | None]:
    """The steps the page opens with, and the "load earlier" sentinel's facts when earlier
    steps are left out (None: none are): the seq they come before and the enclosing steps.
    A link to a step in the first page shows steps up to it; further on, WINDOW_SIZE steps from
    a little before it: an index range, whatever the run's length. A live run's page keeps the
    steps from its first (new ones are added at the end)."""
    if not current or current <= loader.PAGE_SIZE - 20 or run.is_active:
        limit = loader.PAGE_SIZE if not current else min(max(loader.PAGE_SIZE, current + 20),
                                                         loader.MAX_PAGE)
        return loader.step_views(run, limit=limit), None
    views = loader.step_views(run, after=current - loader.WINDOW_BEFORE - 1,
                              limit=loader.WINDOW_SIZE)
    return views, earlier(run, views)


def earlier(run: Run, views: list[StepView]) -> dict[str, Any] | None:
    if not views or loader.first_before(run, views[0].seq) is None:
        return None
    return {"seq": views[0].seq, "inside": loader.enclosing(run, views[0].parent)}


def _received(run: Run) -> dict[str, Any] | None:
    if run.worker != RECEIVED:
        return None
    source = (run.agent_snapshot or {}).get("imported_from") or {}
    return {"service": str(source.get("service") or ""),
            "quiet_s": settings.AGENTLAB_RECEIVER_QUIET_S}


GROUPED_BY = {"session": "its launcher session", "trace": "its traceparent trace id",
              "conversation": "conversation continuity (each request extends the last)"}


def gateway(run: Run) -> dict[str, Any] | None:
    """An outside agent's run through the gateway (agentlab.gateway): what the header says of
    it, and how long a held call waits before the gateway answers it with a timeout."""
    found = (run.agent_snapshot or {}).get("gateway") if isinstance(run.agent_snapshot,
                                                                    dict) else None
    if not isinstance(found, dict):
        return None
    grouped = str(found.get("grouped_by") or "")
    return {"model": str(found.get("model") or ""), "profile": str(found.get("profile") or ""),
            "grouped_by": GROUPED_BY.get(grouped, grouped), "mode": str(found.get("mode") or ""),
            "trace_id": str(found.get("trace_id") or ""),
            "hold_s": getattr(settings, "AGENTLAB_GATEWAY_HOLD_S", None)}


def linked(visible: Any, run: Run) -> list[dict[str, Any]]:
    """Other runs of the same agent run (hook `linked_runs`), those the visitor may see."""
    answer = hook("linked_runs")
    found = answer(run) if answer is not None else []
    if not found:
        return []
    shown = set(visible.filter(pk__in=[f["pk"] for f in found]).values_list("pk", flat=True))
    return [f for f in found if f["pk"] in shown]


def run_feedback(request: HttpRequest, run: Run) -> str:
    """Feedback on the run as a whole, and the way to give it (hook `run_feedback`)."""
    answer = hook("run_feedback")
    return answer(request, run) if answer is not None else ""


def with_feedback(request: HttpRequest, run: Run, views: list[StepView]) -> None:
    """Each step's feedback as this visitor sees it (hook `step_feedback`; none without it)."""
    answer = hook("step_feedback")
    if answer is None or not views or run.is_active:  # live steps arrive without it
        return
    found = answer(request, run, [v.seq for v in views])
    for view in views:
        view.feedback = found.get(view.seq)


def cases_context(user: Any, run_id: int | None) -> dict[str, Any]:
    """Evaluation cases made from the run and the "Add to suite" form's choices, where the
    evaluation app answers (the `run_cases` and `case_form` hooks)."""
    made, form = hook("run_cases"), hook("case_form")
    return {"run_cases": made(user, run_id) if made and run_id else [],
            "case_form": form(user) if form else None}


GUARDRAIL_LINKS = 50  # the run's header links to at most this many guardrail decisions


def guardrail_steps(run: Run) -> list[dict[str, Any]]:
    """The run's guardrail decisions (docs/GUARDRAILS.md), each a link to its step."""
    rows = (run.steps.filter(kind="guardrail").order_by("seq")
            .values("seq", "name", "text", "meta")[:GUARDRAIL_LINKS])
    return [{"seq": r["seq"], "name": r["name"], "text": r["text"],
             "action": (r["meta"] or {}).get("action", "")} for r in rows]


def _next_after(views: list[StepView], last: int) -> int | None:
    return views[-1].seq if views and views[-1].seq < last else None


def origin(snapshot: dict[str, Any]) -> dict[str, str] | None:
    """Where an imported or received trace came from, for the run's header: the framework
    and its version, the instrumentation, the service; and a note (no message content)."""
    found = snapshot.get("imported_from") if isinstance(snapshot, dict) else None
    if not isinstance(found, dict) or found.get("format") != "otlp":
        return None
    framework = " ".join(str(found.get(k) or "") for k in ("framework", "framework_version"))
    return {"framework": framework.strip() or "OpenTelemetry",
            "instrumentation": str(found.get("instrumentation") or found.get("scope") or ""),
            "service": str(found.get("service") or ""), "sdk": str(found.get("sdk") or ""),
            "note": str(found.get("note") or "")}


def _profiles(snapshot: dict[str, Any]) -> list[dict[str, str]]:
    """The profiles of the run's header. A base URL may hold credentials (https://user:pass@…,
    ?api_key=…), so only its scheme, host, port and path are shown."""
    from urllib.parse import urlsplit

    def endpoint(url: Any) -> str:
        if not url:
            return "embedded"
        try:
            parts = urlsplit(str(url))
            host = parts.hostname or ""
            port = f":{parts.port}" if parts.port else ""
        except ValueError:  # not a URL at all (an imported snapshot may hold anything)
            return "(not a URL)"
        if not parts.scheme or not host:
            return "(not a URL)"
        host = f"[{host}]" if ":" in host else host
        return f"{parts.scheme}://{host}{port}{parts.path}"

    profiles = snapshot.get("profiles") if isinstance(snapshot, dict) else None
    if not isinstance(profiles, dict):
        return []
    return [{"role": role, "name": str(p.get("name", "")), "model": str(p.get("model", "")),
             "base_url": endpoint(p.get("base_url"))}
            for role, p in profiles.items() if isinstance(p, dict)]


def run_steps(request: HttpRequest, pk: int) -> HttpResponse:
    """The next page of steps (htmx "load more"), or up to `upto` for the replay; the page
    before `before` ("load earlier"); or the page the run page opens with at step `around`
    (the replay jumping far)."""
    run = visible_run(request, pk)
    after = _int(request.GET.get("after")) or 0
    upto, before = _int(request.GET.get("upto")), _int(request.GET.get("before"))
    around = _int(request.GET.get("around"))
    limit, prev_before, last = loader.PAGE_SIZE, None, loader.last_seq(run)
    if upto and upto > after:
        limit = min(max(limit, upto - after + 20), loader.MAX_PAGE)
    if around is not None:
        views, prev_before = window(run, min(max(around, 1), max(last, 1)))
    elif before is not None:
        views = loader.step_views(run, before=before)
        prev_before = earlier(run, views)
    else:
        views = loader.step_views(run, after=after, limit=limit)
    with_feedback(request, run, views)
    context = {"run": run, "steps": views, "prev_before": prev_before,
               # the earlier page is put before the steps shown: no "load more" after it
               "next_after": None if before is not None else _next_after(views, last)}
    return render(request, "traces/step_list.html#steps", context)


def step_payload(request: HttpRequest, pk: int, seq: int, field: str) -> HttpResponse:
    """One step's full input, output or text, highlighted (opened from a collapsed payload)."""
    return payload_response(visible_run(request, pk), seq, field)


def payload_response(run: Run, seq: int, field: str) -> HttpResponse:
    """Step `seq`'s `field` of a run the caller has authorized."""
    if field not in PAYLOAD_FIELDS:
        raise Http404("no such payload")
    step = get_object_or_404(Step.objects.only("pk", field), run=run, seq=seq)
    value = getattr(step, field)
    html = hl.highlight_value(value) if value not in (None, "") else hl.plain("(empty)")
    return HttpResponse(html)


def step_messages(request: HttpRequest, pk: int, seq: int) -> HttpResponse:
    """The conversation an `llm` step sent: its request's messages, as the model saw them."""
    return messages_response(request, visible_run(request, pk), seq)


def messages_response(request: HttpRequest, run: Run, seq: int) -> HttpResponse:
    """Step `seq`'s messages, of a run the caller has authorized."""
    step = get_object_or_404(Step.objects.only("pk", "kind", "input", "text", "meta"),
                             run=run, seq=seq, kind="llm")
    request_data = step.input if isinstance(step.input, dict) else {}
    messages = [_message(m) for m in request_data.get("messages") or [] if isinstance(m, dict)]
    tools = [t.get("function", t).get("name", "?") for t in request_data.get("tools") or []
             if isinstance(t, dict)]
    params = {k: v for k, v in request_data.items()
              if k not in ("messages", "tools") and v not in (None, "", [], {})}
    # a trace whose instrumentation recorded no content: the step's text says so
    unrecorded = step.text if (step.meta or {}).get("otel.content") == "not recorded" else ""
    return render(request, "traces/_messages.html",
                  {"messages": messages, "tools": tools, "params": params, "seq": seq,
                   "unrecorded": unrecorded})


def _message(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, list):  # content parts: show the text ones as text
        content = "\n".join(str(p.get("text", p)) if isinstance(p, dict) else str(p)
                            for p in content)
    extra = {k: v for k, v in message.items() if k not in ("role", "content")}
    return {"role": str(message.get("role", "?")), "content": "" if content is None
            else str(content), "extra": hl.highlight_value(extra) if extra else None}
