"""Search within one run: steps by text, kind, tool name or status, from a step onwards.

A request reads consecutive steps a CHUNK at a time (an index range on (run, seq), with the
other conditions on indexes (run, kind|name|status, seq)) until it has MATCHES of them, has spent
BUDGET_S or has read SCAN_STEPS, so its cost does not grow with the run: a search through a
million steps that finds nothing early says how far it looked and goes on from there.
"""

from __future__ import annotations

import time
from typing import Any

from django import forms
from django.db.models import Q
from django.db.models.functions import Substr
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from traces import access
from traces.models import Run
from traces.views import steps as loader

MATCHES = 20
CHUNK = 25_000
SCAN_STEPS = 500_000
BUDGET_S = 0.25
SNIPPET = 120  # characters of text around the match
KINDS = ("llm", "tool", "thought", "plan", "reflection", "evaluation", "node", "message",
         "final", "error", "user", "approval", "guardrail")


class FindForm(forms.Form):
    q = forms.CharField(required=False, max_length=200)
    kind = forms.ChoiceField(required=False, choices=[("", "any kind")] + [(k, k) for k in KINDS])
    name = forms.CharField(required=False, max_length=200)
    status = forms.ChoiceField(required=False, choices=[("", "any status"), ("ok", "ok"),
                                                        ("error", "error")])
    after = forms.IntegerField(required=False, min_value=0)


def run_find(request: HttpRequest, pk: int) -> HttpResponse:
    run = access.visible_run(request.user, pk, Run.objects.defer("history"))
    form = FindForm(request.GET)
    if not form.is_valid():
        return render(request, "traces/_find.html", {"run": run, "invalid": True})
    found, searched_to, last = find(run, **form.cleaned_data)
    context = {"run": run, "found": found, "searched_to": searched_to, "last": last,
               "start": (form.cleaned_data["after"] or 0) + 1,
               "more": searched_to < last, "query": {k: v for k, v in form.cleaned_data.items()
                                                     if k != "after" and v}}
    return render(request, "traces/_find.html", context)


def find(run: Any, *, q: str = "", kind: str = "", name: str = "", status: str = "",
         after: int | None = None) -> tuple[list[dict[str, Any]], int, int]:
    """(matches after `after`, the seq searched up to, the run's last seq)."""
    after, last = after or 0, loader.last_seq(run)
    steps = run.steps.all()
    if kind:
        steps = steps.filter(kind=kind)
    if name:
        steps = steps.filter(name=name)
    if status:
        steps = steps.filter(status=status)
    if q:
        steps = steps.filter(Q(text__icontains=q) | Q(name__icontains=q))
    rows: list[dict[str, Any]] = []
    started, searched_to, end = time.monotonic(), after, min(last, after + SCAN_STEPS)
    while len(rows) < MATCHES and searched_to < end:  # a chunk at least, whatever the time
        upto = min(searched_to + CHUNK, end)
        rows += (steps.filter(seq__gt=searched_to, seq__lte=upto).order_by("seq")
                 .annotate(head=Substr("text", 1, 4000))
                 .values("seq", "kind", "name", "status", "head")[:MATCHES - len(rows)])
        searched_to = rows[-1]["seq"] if len(rows) == MATCHES else upto
        if time.monotonic() - started > BUDGET_S:
            break
    return [{**r, "snippet": _snippet(r.pop("head") or "", q)} for r in rows], searched_to, last


def _snippet(text: str, q: str) -> str:
    at = text.lower().find(q.lower()) if q else -1
    start = max(at - SNIPPET // 3, 0) if at >= 0 else 0
    cut = text[start:start + SNIPPET]
    return ("…" if start else "") + cut + ("…" if start + SNIPPET < len(text) else "")
