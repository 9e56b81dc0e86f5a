"""Who reaches a queue and which of its items they see (docs/REVIEW.md "Who sees what").

- A queue is reached by its reviewers and by staff; anyone else gets a 404, as for a queue
  that does not exist. Making, changing and filling queues is staff's.
- Staff see every item. A reviewer sees an item when they may see its runs anyway
  (traces.access: their own), or when the queue's owner put it there (by hand or by one of
  the queue's rules) and the owner is active staff now. An item another staff user added of a
  run the reviewer may not see stays hidden from them; so does every such item once the owner
  is no longer staff. Each request reads the rows again.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404

from agentlab.review.models import Item, Queue
from traces.models import Run


def is_staff(user: Any) -> bool:
    return bool(user.is_authenticated and user.is_active and user.is_staff)


def queue_for(user: Any, pk: int) -> Queue:
    """The queue `pk` if `user` reviews in it or is staff, else Http404."""
    return get_object_or_404(Queue.objects.reachable_by(user).select_related("owner"), pk=pk)


def staff_queue(user: Any, pk: int) -> Queue:
    """The queue `pk` for staff (who make, change and fill queues), else Http404."""
    if not is_staff(user):
        raise Http404("no such queue")
    return queue_for(user, pk)


def items_for(user: Any, queue: Queue) -> QuerySet[Item]:
    """The items of `queue` that `user` sees (the queue as `queue_for` gave it)."""
    if is_staff(user):
        return queue.items.all()
    if not queue.reviewers.filter(pk=user.pk).exists():
        return queue.items.none()
    visible = Run.objects.visible_to(user).values("pk")
    seen = Q(run__in=visible) & (Q(run_b__isnull=True) | Q(run_b__in=visible))
    owner = queue.owner
    if owner.is_active and owner.is_staff:
        seen |= Q(added_by_id=owner.pk)
    return queue.items.filter(seen)


def item_for(user: Any, queue: Queue, pk: int) -> Item:
    return get_object_or_404(items_for(user, queue).select_related("run", "run_b"), pk=pk)


def run_through_items(user: Any, run_id: int) -> Run:
    """Run `run_id` if it is in an item `user` sees in a queue they reach (a reviewer's way
    to a step's payload on the review page), else Http404."""
    for queue in Queue.objects.reachable_by(user).select_related("owner").filter(
            Q(items__run_id=run_id) | Q(items__run_b_id=run_id)).distinct()[:20]:
        if items_for(user, queue).filter(Q(run_id=run_id) | Q(run_b_id=run_id)).exists():
            return Run.objects.defer("history").get(pk=run_id)
    raise Http404("no such run")
