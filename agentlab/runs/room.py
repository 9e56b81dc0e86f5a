"""The per-user limit on runs going at once: a run is created or claimed only while its user
has room for it (settings.AGENTLAB_MAX_ACTIVE_RUNS)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q, QuerySet

from traces.models import Run
from traces.owners import RECEIVED
from traces.schema import HELD_STATUSES


class RunLimit(ValueError):
    """The user already has as many runs going as one user may (the message says so)."""


def going(user_id: int) -> QuerySet[Run]:
    """The user's runs that hold a place: running, paused, or queued and claimed by a process
    (a one-off run nobody started yet holds none: it is counted when its page starts it).
    A received run (agentlab.receiver) holds none: no process here executes it."""
    return Run.objects.filter(Q(status__in=HELD_STATUSES)
                              | Q(status="queued") & ~Q(worker=""),
                              user_id=user_id).exclude(worker=RECEIVED)


def ensure_room(user: Any, more: int = 1) -> None:
    """Refuse (RunLimit) when `more` runs would take `user` (a user or an id) over
    settings.AGENTLAB_MAX_ACTIVE_RUNS (0: no limit). Call it inside the transaction that
    creates or claims the runs: it locks the user's row (PostgreSQL; SQLite's IMMEDIATE
    transactions already serialise writers), so two requests cannot both take the last place."""
    limit = settings.AGENTLAB_MAX_ACTIVE_RUNS
    if limit <= 0:
        return
    user_id = getattr(user, "pk", user)
    with transaction.atomic():
        list(get_user_model().objects.select_for_update().filter(pk=user_id).values_list("pk"))
        taken = going(user_id).count()
    if taken + more > limit:
        asked = "another run" if more == 1 else f"{more} more runs"
        raise RunLimit(f"You already have {taken} run{'s' * (taken != 1)} going and one user "
                       f"may have {limit} at once, so {asked} cannot start: wait for one to "
                       "finish, or cancel one.")
