"""Chat pages (agents, conversations, one conversation) and the live page of one run.

A conversation is its owner's alone (traces.access "converse": staff included); a one-off run
is watched and steered by whoever may (traces.access), on its live page.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from agentlab.chat.models import Conversation
from agentlab.chat.turns import TITLE_CHARS, turn_context
from agentlab.models import Agent
from agentlab.runs import start
from traces.access import require, visible_run
from traces.display.renderer import first_steps_html

STEPS_SHOWN = 300  # per turn / run page; the trace viewer has them all


def index(request: HttpRequest) -> HttpResponse:
    agents = Agent.objects.all()
    conversations = Conversation.objects.owned_by(request.user).select_related("agent")
    return render(request, "chat/index.html", {
        "agents": agents, "conversations": conversations,
        "max_message_chars": settings.AGENTLAB_MAX_MESSAGE_CHARS})


def _agent(request: HttpRequest) -> Agent:
    """The agent the form names; a missing or malformed id is a 404."""
    raw = request.POST.get("agent") or ""
    return get_object_or_404(Agent, pk=int(raw) if raw.isdigit() else 0)


@require_POST
def new_conversation(request: HttpRequest) -> HttpResponse:
    agent = _agent(request)
    conversation = Conversation.objects.create(user=request.user, agent=agent)
    return redirect("chat_conversation", pk=conversation.pk)


@require_POST
def start_run(request: HttpRequest) -> HttpResponse:
    """A one-off run of an agent: queued here, started by its live page (so step mode and
    breakpoints can be set before the first step)."""
    agent = _agent(request)
    question = (request.POST.get("question") or "").strip()
    limit = settings.AGENTLAB_MAX_MESSAGE_CHARS
    if not question:
        messages.error(request, "Type a question for the agent.")
        return redirect("chat")
    if len(question) > limit:
        messages.error(request, f"The question is {len(question):,} characters; a question "
                                f"may have at most {limit:,}.")
        return redirect("chat")
    try:
        # Not claimed: its page's "start" claims it, and asks for room again.
        run = start.start_run(request.user, agent, question)
    except start.RunLimit as exc:
        messages.error(request, str(exc))
        return redirect("chat")
    except ValueError as exc:
        messages.error(request, f"{agent.name} cannot run: {exc}")
        return redirect("chat")
    query = "?start=1" + ("&step_mode=1" if request.POST.get("step_mode") else "")
    return redirect(reverse("live_run", args=[run.pk]) + query)


def live_run(request: HttpRequest, pk: int) -> HttpResponse:
    run = visible_run(request.user, pk)
    return render(request, "live/run.html", {
        "run": run, "steps_html": first_steps_html(run, STEPS_SHOWN),
        "autostart": request.GET.get("start") == "1" and run.status == "queued",
        "step_mode": request.GET.get("step_mode") == "1",
    })


def conversation(request: HttpRequest, pk: int) -> HttpResponse:
    conv = require(request.user, "converse", Conversation.objects.select_related("agent"), pk)
    turns = []
    for turn in conv.turns.select_related("run"):
        turns.append({**turn_context(turn), "steps_html": first_steps_html(turn.run, STEPS_SHOWN)})
    return render(request, "chat/conversation.html", {
        "conversation": conv, "turns": turns,
        "max_message_chars": settings.AGENTLAB_MAX_MESSAGE_CHARS})


@require_POST
def rename(request: HttpRequest, pk: int) -> HttpResponse:
    conv = require(request.user, "converse", Conversation.objects.all(), pk)
    conv.title = " ".join((request.POST.get("title") or "").split())[:TITLE_CHARS]
    conv.save(update_fields=["title", "updated"])
    return redirect("chat_conversation", pk=conv.pk)


@require_POST
def delete(request: HttpRequest, pk: int) -> HttpResponse:
    """Deletes the conversation; its runs stay in the trace list."""
    conv = require(request.user, "converse", Conversation.objects.all(), pk)
    name = str(conv)
    conv.delete()
    messages.success(request, f"Deleted “{name}”.")
    return redirect("chat")

