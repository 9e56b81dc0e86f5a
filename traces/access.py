"""Which runs a user may see: their own, or every run for staff (`OwnedQuerySet.visible_to`).

One helper for pages, forms and sockets. Another user's run is a 404, not a 403: its existence
is not disclosed.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import Http404

from traces.models import Run


def visible_run(user: Any, pk: int, runs: QuerySet[Run] | None = None) -> Run:
    """The run `pk` if `user` may see it (from `runs`, a narrowed Run queryset), else Http404."""
    try:
        return (runs if runs is not None else Run.objects).visible_to(user).get(pk=pk)
    except Run.DoesNotExist:
        raise Http404(f"no run {pk}") from None


def can_see_run(user: Any, pk: int) -> bool:
    return Run.objects.visible_to(user).filter(pk=pk).exists()
