"""Giving, editing and deleting feedback, from the run page (htmx: each answer is the target's
strip, swapped in place) or without scripts (a page of its own, then back to the run).

Every request is authorized on its own: the run must be one the visitor may see
(traces.access; another user's run is a 404 like a missing one), and a row is edited or
deleted only by its author (anyone else gets the same 404, staff included)."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import reswap, retarget

from agentlab.feedback import record
from agentlab.feedback.display import strip_for, target_words
from agentlab.feedback.forms import EditForm, GiveForm
from agentlab.feedback.models import RUN, Feedback, FeedbackKey
from agentlab.feedback.values import THUMBS, FeedbackError
from traces import access
from traces.models import Run

RUN_FIELDS = ("pk", "user_id", "agent_snapshot", "input")


def _run(request: HttpRequest, pk: int, seq: int) -> Run:
    run = access.visible_run(request.user, pk, Run.objects.only(*RUN_FIELDS))
    try:
        record.check_target(run, seq)
    except FeedbackError as e:
        raise Http404(str(e)) from None
    return run


def _row(request: HttpRequest, pk: int) -> Feedback:
    """The visitor's own feedback row `pk`, on a run they may still see; else Http404."""
    row = get_object_or_404(Feedback.objects.visible_to(request.user)
                            .select_related("run", "key"), pk=pk)
    if not row.editable_by(request.user):
        raise Http404("not your feedback")
    return row


def _done(request: HttpRequest, run: Run, seq: int, said: str = "") -> HttpResponse:
    """After a write: the target's strip (htmx), or back to the run page."""
    if request.htmx:
        return HttpResponse(strip_for(request, run, seq))
    if said:
        messages.success(request, said)
    url = reverse("run", args=[run.pk])
    return redirect(f"{url}?step={seq}" if seq != RUN else f"{url}#feedback-0")


def _again(request: HttpRequest, template: str, context: dict,
           replaces: str = "this") -> HttpResponse:
    """The form again, with what is wrong: in place of `replaces` (htmx swaps only a 2xx
    answer into the target it was sent for), or as a page."""
    if request.htmx:
        response = render(request, template, context)
        return reswap(retarget(response, replaces), "outerHTML")
    return render(request, "feedback/page.html", {**context, "form_template": template},
                  status=400)


@require_GET
def strip_view(request: HttpRequest, pk: int, seq: int) -> HttpResponse:
    """A target's strip as it is now (the edit form's Cancel)."""
    return HttpResponse(strip_for(request, _run(request, pk, seq), seq))


@require_POST
def thumbs(request: HttpRequest, pk: int, seq: int) -> HttpResponse:
    run = _run(request, pk, seq)
    try:
        row = record.toggle_thumb(run, seq, request.user, request.POST.get("value", ""))
    except FeedbackError as e:
        return HttpResponse(str(e), status=400)
    said = f"{row.shown} on {target_words(seq)}." if row else "Thumb taken back."
    return _done(request, run, seq, said)


@require_http_methods(["GET", "POST"])
def give(request: HttpRequest, pk: int, seq: int) -> HttpResponse:
    """Every key's value and a note on one target (what the user gave before, filled in)."""
    run = _run(request, pk, seq)
    keys = list(FeedbackKey.objects.all())
    mine = {r.name: r for r in Feedback.objects.filter(run=run, seq=seq, author=request.user)}
    form = GiveForm(request.POST if request.method == "POST" else None, keys=keys, mine=mine)
    context = {"form": form, "run": run, "seq": seq, "target": target_words(seq),
               "action": reverse("feedback:form", args=[run.pk, seq])}
    if request.method == "GET":
        template = "feedback/_form.html" if request.htmx else "feedback/page.html"
        return render(request, template, {**context, "form_template": "feedback/_form.html"})
    if not form.is_valid():
        return _again(request, "feedback/_form.html", context)
    try:
        for name, key in form.keys.items():
            if form.cleaned_data.get(name):
                record.give_key(run, seq, request.user, key, form.cleaned_data[name])
            elif key.name in mine:  # cleared: the value is taken back
                record.remove(mine[key.name])
        record.give_note(run, seq, request.user, form.cleaned_data["note"])
    except FeedbackError as e:  # the key changed between the form and the save
        form.add_error(None, str(e))
        return _again(request, "feedback/_form.html", context)
    return _done(request, run, seq, f"Feedback saved on {target_words(seq)}.")


@require_http_methods(["GET", "POST"])
def edit(request: HttpRequest, pk: int) -> HttpResponse:
    row = _row(request, pk)
    form = EditForm(request.POST if request.method == "POST" else None, row=row)
    context = {"form": form, "row": row, "run": row.run, "seq": row.seq,
               "target": target_words(row.seq),
               "action": reverse("feedback:edit", args=[row.pk]),
               "cancel": reverse("feedback:strip", args=[row.run_id, row.seq])}
    if request.method == "GET":
        template = "feedback/_edit.html" if request.htmx else "feedback/page.html"
        return render(request, template, {**context, "form_template": "feedback/_edit.html"})
    if not form.is_valid():
        return _again(request, "feedback/_edit.html", context, "closest li")
    raw = form.cleaned_data.get("value") or (row.label if row.name == THUMBS else "")
    try:
        record.edit(row, raw, form.cleaned_data["note"])
    except FeedbackError as e:
        form.add_error(None, str(e))
        return _again(request, "feedback/_edit.html", context, "closest li")
    return _done(request, row.run, row.seq, "Feedback changed.")


@require_POST
def delete(request: HttpRequest, pk: int) -> HttpResponse:
    row = _row(request, pk)
    run, seq = row.run, row.seq
    record.remove(row)
    return _done(request, run, seq, "Feedback deleted.")
