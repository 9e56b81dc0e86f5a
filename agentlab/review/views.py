"""The reviewer's pages: the queues they review in, a queue's page (progress, who said what,
agreement), and working through it one item at a time (answer, skip, move), with the trace
(or, pairwise, the diff of two runs) beside the rubric.

Every request is authorized on its own (agentlab/review/access.py): the queue must be one the
visitor reviews in (or staff), the item one they see; anything else is a 404, as for a queue
or item that does not exist."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from agentlab.review import access, answers
from agentlab.review.filters import described
from agentlab.review.forms import AnswerForm, PairForm, RuleForm
from agentlab.review.models import Item, Queue, Review
from traces import access as run_access
from traces.display.html import step_html
from traces.views import steps as loader
from traces.views.diff import diff_context
from traces.views.run import messages_response, payload_response

ITEMS_PAGE = 50
MAX_STEPS = loader.MAX_PAGE  # an item shows at most this many steps of its run


@require_GET
def index(request: HttpRequest) -> HttpResponse:
    queues = []
    for queue in Queue.objects.reachable_by(request.user).select_related("owner")[:200]:
        items = access.items_for(request.user, queue)
        queues.append({"queue": queue, "progress": answers.progress(items, queue, request.user),
                       "reviewer": queue.reviewers.filter(pk=request.user.pk).exists()})
    return render(request, "review/index.html", {"queues": queues})


@require_GET
def queue_page(request: HttpRequest, pk: int) -> HttpResponse:
    queue = access.queue_for(request.user, pk)
    items = access.items_for(request.user, queue)
    page = Paginator(answers.with_counts(items).select_related("run", "run_b").order_by("pk"),
                     ITEMS_PAGE).get_page(request.GET.get("page"))
    shown, _values = answers.said(queue, page.object_list)
    # Agreement over every item the visitor sees, not just this page (the values only).
    _all_said, values = answers.said(queue, list(items.only("pk", "run_id")[:5000]))
    context = {
        "queue": queue, "page": page, "said": shown,
        "rows": [{"item": item, "said": shown.get(item.pk, [])} for item in page.object_list],
        "progress": answers.progress(items, queue, request.user),
        "agreement": answers.agreement_of(queue, values),
        "keys": answers.rubric(queue), "reviewer": queue.reviewers.filter(
            pk=request.user.pk).exists(),
        "reviewers": list(queue.reviewers.order_by("username")),
        "staff": access.is_staff(request.user),
    }
    if context["staff"]:
        context["rules"] = [{"rule": r, "words": described(r.query)} for r in queue.rules.all()]
        context["rule_form"] = RuleForm(initial={"which": "finished", "percent": 100})
        context["agent_names"] = _agent_names()
    return render(request, "review/queue.html", context)


def _agent_names() -> list[str]:
    from agentlab.models import Agent

    return list(Agent.objects.order_by("name").values_list("name", flat=True)[:200])


@require_GET
def work(request: HttpRequest, pk: int) -> HttpResponse:
    """The reviewer's next item (?skipped=1: the next one they skipped), or "all done"."""
    queue = access.queue_for(request.user, pk)
    items = access.items_for(request.user, queue)
    skipped = request.GET.get("skipped") == "1"
    nxt = answers.todo(items, queue, request.user, skipped=skipped).order_by("pk").first()
    if nxt is not None:
        return redirect("review:item", pk=queue.pk, item=nxt.pk)
    return render(request, "review/done.html", {
        "queue": queue, "progress": answers.progress(items, queue, request.user)})


@require_GET
def item_page(request: HttpRequest, pk: int, item: int) -> HttpResponse:
    queue = access.queue_for(request.user, pk)
    found = access.item_for(request.user, queue, item)
    return render(request, "review/item.html", _item_context(request, queue, found))


def _item_context(request: HttpRequest, queue: Queue, item: Item, form: Any = None
                  ) -> dict[str, Any]:
    user = request.user
    items = access.items_for(user, queue)
    review = Review.objects.filter(item=item, reviewer=user).first()
    context: dict[str, Any] = {
        "queue": queue, "item": item, "review": review,
        "position": items.filter(pk__lt=item.pk).count() + 1,
        "progress": answers.progress(items, queue, user),
        "previous": items.filter(pk__lt=item.pk).order_by("-pk").values_list("pk", flat=True)
        .first(),
        "next": items.filter(pk__gt=item.pk).order_by("pk").values_list("pk", flat=True).first(),
        "reviewer": queue.reviewers.filter(pk=user.pk).exists(),
    }
    if queue.pairwise:
        context |= diff_context(item.run, item.run_b)
        context["sides"] = [("A", item.run), ("B", item.run_b)]
        context["form"] = form or PairForm(initial_choice=review.choice if review else "",
                                           note=review.note if review else "")
    else:
        keys = answers.rubric(queue)
        context["form"] = form or AnswerForm(queue=queue, keys=keys,
                                             mine=answers.mine(item, user))
        views = loader.step_views(item.run, limit=MAX_STEPS)
        context["steps_html"] = [step_html(v, item.run, via="review:") for v in views]
        context["last_seq"] = loader.last_seq(item.run)
        context["can_open"] = run_access.allowed(user, "watch", item.run)
    return context


@require_POST
def submit(request: HttpRequest, pk: int, item: int) -> HttpResponse:
    """The reviewer's answer; then their next item."""
    queue = access.queue_for(request.user, pk)
    found = access.item_for(request.user, queue, item)
    if not queue.reviewers.filter(pk=request.user.pk).exists():  # staff who only look
        messages.error(request, "Only the queue's reviewers answer its items.")
        return redirect("review:item", pk=queue.pk, item=found.pk)
    if queue.pairwise:
        form: Any = PairForm(request.POST)
        if form.is_valid():
            answers.choose(found, request.user, form.cleaned_data["choice"],
                           form.cleaned_data["note"])
    else:
        keys = answers.rubric(queue)
        before = answers.mine(found, request.user)
        form = AnswerForm(request.POST, queue=queue, keys=keys, mine=before)
        if form.is_valid():
            answers.answer(found, request.user, keys, form.cleaned_data, before)
    if form.errors:
        return render(request, "review/item.html",
                      _item_context(request, queue, found, form), status=400)
    messages.success(request, f"Saved your review of item {found.pk}.")
    return redirect("review:work", pk=queue.pk)


@require_POST
def skip(request: HttpRequest, pk: int, item: int) -> HttpResponse:
    queue = access.queue_for(request.user, pk)
    found = access.item_for(request.user, queue, item)
    if queue.reviewers.filter(pk=request.user.pk).exists():
        answers.skip(found, request.user)
    nxt = (answers.todo(access.items_for(request.user, queue), queue, request.user)
           .filter(pk__gt=found.pk).order_by("pk").first())
    if nxt is not None:
        return redirect("review:item", pk=queue.pk, item=nxt.pk)
    return redirect(reverse("review:work", args=[queue.pk]))


@require_GET
def step_payload(request: HttpRequest, pk: int, seq: int, field: str) -> HttpResponse:
    """A folded part of a step, for the review page (the run through an item the visitor
    sees, whether or not they may open the run's page)."""
    return payload_response(access.run_through_items(request.user, pk), seq, field)


@require_GET
def step_messages(request: HttpRequest, pk: int, seq: int) -> HttpResponse:
    return messages_response(request, access.run_through_items(request.user, pk), seq)
