"""Staff's pages: make and change a queue, fill it from the runs list's filter or with a pair
from the diff page, add and remove its rules. Anyone else gets a 404 on each of them, GET and
POST alike (access.staff_queue, access.is_staff); the runs are read as the staff user sees
them."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from agentlab.review import access, fill, filters
from agentlab.review.forms import FillForm, QueueForm, RuleForm
from agentlab.review.models import Queue, Rule
from traces import access as run_access
from traces.models import Run
from traces.schema import FINISHED_STATUSES


def _staff(request: HttpRequest) -> None:
    if not access.is_staff(request.user):
        raise Http404("no such page")


@require_http_methods(["GET", "POST"])
def new(request: HttpRequest) -> HttpResponse:
    _staff(request)
    form = QueueForm(request.POST or None, initial={"reviewers": [request.user.pk]})
    if request.method == "POST" and form.is_valid():
        queue = form.save(commit=False)
        queue.owner = request.user
        queue.save()
        form.save_m2m()
        messages.success(request, f"Made the queue “{queue.name}”. Fill it from the runs "
                                  "list's filter, or add a rule.")
        return redirect("review:queue", pk=queue.pk)
    return render(request, "review/form.html", {"form": form, "queue": None},
                  status=400 if form.errors else 200)


@require_http_methods(["GET", "POST"])
def edit(request: HttpRequest, pk: int) -> HttpResponse:
    queue = access.staff_queue(request.user, pk)
    form = QueueForm(request.POST or None, instance=queue)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, f"Saved the queue “{queue.name}”.")
        return redirect("review:queue", pk=queue.pk)
    return render(request, "review/form.html", {"form": form, "queue": queue},
                  status=400 if form.errors else 200)


def _fill_page(request: HttpRequest, form: FillForm, query: str, status: int = 200
               ) -> HttpResponse:
    try:
        runs = filters.runs_matching(request.user, query)
        matched = runs.filter(status__in=FINISHED_STATUSES)[:fill.MAX_ADD + 1].count()
        problem = ""
    except filters.FilterError as e:
        matched, problem = 0, str(e)
    return render(request, "review/fill.html", {
        "form": form, "query": query, "words": filters.described(query), "matched": matched,
        "max_add": fill.MAX_ADD, "problem": problem, "queues": form.fields["queue"].queryset,
    }, status=status)


@require_http_methods(["GET", "POST"])
def fill_view(request: HttpRequest) -> HttpResponse:
    """GET ?<the runs list's query string>: how many finished runs it keeps, which queue;
    POST: they join the queue (and, if asked, a rule keeps adding new ones)."""
    _staff(request)
    queues = Queue.objects.order_by("name")
    if request.method == "GET":
        query = filters.clean_query(request.GET.urlencode()[:filters.MAX_QUERY_CHARS])
        return _fill_page(request, FillForm(initial={"query": query, "percent": 100},
                                            queues=queues), query)
    form = FillForm(request.POST, queues=queues)
    query = request.POST.get("query", "")[:filters.MAX_QUERY_CHARS]
    if not form.is_valid():
        return _fill_page(request, form, query, status=400)
    queue, query = form.cleaned_data["queue"], form.cleaned_data["query"]
    try:
        with transaction.atomic():
            added, matched = fill.from_runs(queue, filters.runs_matching(request.user, query),
                                            request.user)
            if form.cleaned_data["keep"]:
                _add_rule(queue, query, form.cleaned_data.get("percent") or 100)
    except fill.FillError as e:
        form.add_error(None, str(e))
        return _fill_page(request, form, query, status=400)
    what = "pairs" if queue.pairwise else "runs"
    text = f"Added {added} {what} to “{queue.name}”" + (
        f" ({matched - added} were there already)." if matched > added else ".")
    if form.cleaned_data["keep"]:
        text += " New runs that match will join it as they finish."
    messages.success(request, text)
    return redirect("review:queue", pk=queue.pk)


def _add_rule(queue: Queue, query: str, percent: float) -> Rule:
    last = Run.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    return Rule.objects.create(queue=queue, query=query, percent=percent, after=last)


@require_http_methods(["GET", "POST"])
def send_pair(request: HttpRequest) -> HttpResponse:
    """The diff page's two runs as one item of a pairwise queue."""
    _staff(request)
    data = request.POST if request.method == "POST" else request.GET
    runs = [run_access.visible_run(request.user, _int(data.get(side))) for side in "ab"]
    queues = Queue.objects.filter(mode="pairwise").order_by("name")
    problem = ""
    if request.method == "POST":
        queue = get_object_or_404(queues, pk=_int(data.get("queue")))
        try:
            added = fill.pair(queue, runs[0], runs[1], request.user)
        except fill.FillError as e:
            problem = str(e)
        else:
            messages.success(request, f"Runs {runs[0].pk} and {runs[1].pk} are "
                                      f"{'now' if added else 'already'} an item of "
                                      f"“{queue.name}”.")
            return redirect("review:queue", pk=queue.pk)
    return render(request, "review/send_pair.html", {"a": runs[0], "b": runs[1],
                                                      "queues": queues, "problem": problem},
                  status=400 if problem else 200)


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise Http404("no such row") from None


@require_POST
def rule_add(request: HttpRequest, pk: int) -> HttpResponse:
    queue = access.staff_queue(request.user, pk)
    form = RuleForm(request.POST)
    if form.is_valid():
        _add_rule(queue, form.cleaned_data["filter"], form.cleaned_data["percent"])
        messages.success(request, "Added the rule: new runs that match join the queue as "
                                  "they finish.")
    else:
        problems = "; ".join(f"{form.fields[n].label if n in form.fields else ''}: {' '.join(e)}"
                             .lstrip(": ") for n, e in form.errors.items())
        messages.error(request, f"The rule was not added: {problems}")
    return redirect("review:queue", pk=queue.pk)


@require_POST
def rule_delete(request: HttpRequest, pk: int, rule: int) -> HttpResponse:
    queue = access.staff_queue(request.user, pk)
    get_object_or_404(queue.rules, pk=rule).delete()
    messages.info(request, "Removed the rule; the items it added stay.")
    return redirect("review:queue", pk=queue.pk)
