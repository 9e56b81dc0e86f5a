"""Who may do what to a run (and to the other rows a user owns): one policy for pages, forms,
sockets and every socket frame (docs/LIVE_PROTOCOL.md says which frame needs which action).

The rules are pure (`allowed`): a user, an action, and the row's owner. The helpers that read
rows (`require`, `run_for`, `visible_run`, `may`, `may_act`) read the owner fresh from the
database each time, so a check made on a socket's frame sees today's ownership, not the
connect's.

A refusal is a 404, not a 403, whatever the action: no rule discloses that a row exists. (Every
rule today lets whoever may watch a row also act on it, so a 403 would tell nobody anything.)
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from django.db.models import Model, QuerySet
from django.http import Http404

from traces.models import Run

Action = Literal["watch", "control", "approve", "fork", "converse"]
Role = Literal["owner", "staff"]

WATCHERS: frozenset[Role] = frozenset({"owner", "staff"})
# Who may take each action on a row (a run, a comparison, an experiment, a conversation).
RULES: dict[Action, frozenset[Role]] = {
    "watch": WATCHERS,  # see it: its pages, the run socket, its steps and figures
    # start, pause, resume, step, cancel, debug, edit; a comparison's re-run, an experiment's cancel
    "control": frozenset({"owner", "staff"}),
    "approve": frozenset({"owner", "staff"}),  # approve or deny a tool call that waits
    "fork": WATCHERS,  # fork, replay, resume, re-run an experiment: the new row is theirs
    "converse": frozenset({"owner"}),  # a conversation is personal, staff included
}


class Owned(Protocol):
    user_id: int | None


def roles(user: Any, owner_id: int | None) -> frozenset[Role]:
    """What `user` is to a row owned by `owner_id`: nothing when anonymous or deactivated."""
    if user is None or not user.is_authenticated or not user.is_active:
        return frozenset()
    found: set[Role] = set()
    if owner_id is not None and user.pk == owner_id:
        found.add("owner")
    if user.is_staff:
        found.add("staff")
    return frozenset(found)


def allowed(user: Any, action: Action, row: Owned | None) -> bool:
    """May `user` take `action` on `row` (anything with a `user_id`; None: no such row)?"""
    if row is None:
        return False
    return bool(roles(user, row.user_id) & RULES[action])


def require[M: Model](user: Any, action: Action, rows: QuerySet[M], pk: int) -> M:
    """The row `pk` of `rows`, read now, if `user` may take `action` on it; else Http404."""
    try:
        row = rows.get(pk=pk)
    except rows.model.DoesNotExist:
        row = None
    if row is None or not allowed(user, action, row):  # type: ignore[arg-type]
        raise Http404(f"no {rows.model._meta.verbose_name} {pk}")
    return row


def run_for(user: Any, action: Action, pk: int, runs: QuerySet[Run] | None = None) -> Run:
    """The run `pk` (from `runs`, a narrowed Run queryset) if `user` may take `action` on it,
    else Http404."""
    return require(user, action, runs if runs is not None else Run.objects.all(), pk)


def visible_run(user: Any, pk: int, runs: QuerySet[Run] | None = None) -> Run:
    """The run `pk` if `user` may watch it (from `runs`, a narrowed Run queryset), else Http404."""
    return run_for(user, "watch", pk, runs)


def may(user: Any, action: Action, rows: QuerySet[Any], pk: int) -> bool:
    """May `user` take `action` on the row `pk` of `rows`? Its owner is read now (one small
    query): what a socket asks before each frame it acts on."""
    owner = rows.filter(pk=pk).values_list("user_id", flat=True).first()
    return owner is not None and bool(roles(user, owner) & RULES[action])


def may_act(user: Any, action: Action, pk: int) -> bool:
    """May `user` take `action` on run `pk` (its owner read now)?"""
    return may(user, action, Run.objects.all(), pk)


def can_see_run(user: Any, pk: int) -> bool:
    return may_act(user, "watch", pk)
