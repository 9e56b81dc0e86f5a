"""Compare pages: the form and saved list, one comparison's live columns, its summary."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from agentlab.compare import rounds
from agentlab.compare.forms import CompareForm
from agentlab.compare.models import Comparison
from agentlab.compare.summary import all_finished, pairs, summarize
from agentlab.runs import start
from traces import access
from traces.display.renderer import first_steps_html

# The trace diff (traces app) takes two run ids as ?a=&b=.
DIFF_PATH = "/runs/diff/"
POLL_SECONDS = 2
STEPS_SHOWN = 300  # per column; the run page has them all


@require_http_methods(["GET", "POST"])
async def index(request: HttpRequest) -> HttpResponse:
    """The form and the saved comparisons; a valid POST starts every run at once."""
    user = await request.auser()
    form = CompareForm(request.POST or None)
    if request.method == "POST" and await sync_to_async(form.is_valid)():
        data = form.cleaned_data
        try:
            comparison, runs = await sync_to_async(rounds.create_comparison)(
                user, data["question"], data["agents"], data["title"])
        except start.RunLimit as exc:  # nothing saved
            form.add_error(None, str(exc))
        except ValueError as exc:  # an agent whose configuration cannot run (nothing saved)
            form.add_error(None, f"A chosen agent cannot run: {exc}")
        else:
            # Runs are tasks of this (daphne's) loop, so they outlive the request.
            await rounds.launch_all(runs)
            return redirect("compare:detail", pk=comparison.pk)
    return await sync_to_async(_render_index)(request, user, form)


def _render_index(request: HttpRequest, user: Any, form: CompareForm) -> HttpResponse:
    saved = Comparison.objects.visible_to(user).select_related("user")[:100]
    return render(request, "compare/index.html", {"form": form, "saved": list(saved)})


@require_POST
async def rerun(request: HttpRequest, pk: int) -> HttpResponse:
    """New runs for the same question and agents, as the comparison's next round (the owner's
    runs, whoever asked: a round belongs to its comparison)."""
    user = await request.auser()
    comparison = await _aget(user, pk, "control")
    try:
        agents = await sync_to_async(rounds.rerun_agents)(comparison)
        runs = await sync_to_async(rounds.new_round)(comparison, agents)
    except ValueError as exc:  # too few agents left, or start.RunLimit (nothing saved)
        messages.error(request, str(exc))
        return redirect("compare:detail", pk=pk)
    await rounds.launch_all(runs)
    return redirect("compare:detail", pk=pk)


@require_GET
def detail(request: HttpRequest, pk: int) -> HttpResponse:
    context = _round_context(request, pk)
    # Steps so far are rendered here; the socket then sends only later ones (sync last_seq).
    context["columns"] = [(e, first_steps_html(e.run, STEPS_SHOWN)) for e in context["entries"]]
    return render(request, "compare/detail.html", context)


@require_GET
def summary(request: HttpRequest, pk: int) -> HttpResponse:
    """The summary fragment alone (htmx polls it while runs are active)."""
    return render(request, "compare/detail.html#summary", _round_context(request, pk))


def _round_context(request: HttpRequest, pk: int) -> dict[str, Any]:
    comparison = _get(request.user, pk)
    last = comparison.last_round
    try:
        number = int(request.GET.get("round") or last)
    except ValueError:
        raise Http404("no such round") from None
    entries = rounds.round_entries(comparison, number)
    if not entries:
        raise Http404("no such round")
    runs = [e.run for e in entries]
    finished = all_finished(runs)
    table = summarize(runs) if finished else None
    diffs = [(a, b, f"{DIFF_PATH}?a={a.pk}&b={b.pk}") for a, b in pairs(runs)]
    return {
        "comparison": comparison, "round": number, "rounds": range(1, last + 1),
        "entries": entries, "finished": finished, "table": table,
        "chart": table.chart_data() if table else None, "diffs": diffs,
        "poll_seconds": POLL_SECONDS,
    }


def _get(user: Any, pk: int, action: access.Action = "watch") -> Comparison:
    # Another user's comparison is a 404 (like runs): its existence is not disclosed.
    return access.require(user, action, Comparison.objects.all(), pk)


_aget = sync_to_async(_get)
