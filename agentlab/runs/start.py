"""The one way a run comes to be: `start_runs` (and its one-run form `start_run`).

Every place that makes runs — a chat turn, a one-off run, a comparison's round, an
experiment's pair, a fork, replay or resume, a code agent's call, the terminal commands, and
any new way in — calls it with what the new runs are (an agent row, frozen now, or a snapshot
already bound), whose they are, and how many places they take under the per-user limit on runs
going at once (agentlab/runs/room.py). It checks that room and creates the rows in one
transaction: room.RunLimit and nothing created, or the queued runs.

Executing them is the second step, the same for every caller: `engine.submit(run)` (this
process, or the workers: agentlab/runs/engine.py) for a run claimed at creation; a run left
unclaimed (a one-off run) is claimed by its page's "start" (execution.claim_queued), which asks
for room again; the terminal's own runs are executed in place (execution.execute_run).

Something admitted now whose runs come later (an experiment: its pairs' runs are created with
places=0, not refused one by one) takes its places with `reserve`, in the transaction that
creates it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from agentlab.models import Agent
from agentlab.runs.room import RunLimit, ensure_room
from agentlab.runs.snapshot import create_run, queued_run
from traces.models import Run
from traces.owners import RECEIVED, process_id

__all__ = ["RunLimit", "gateway_run", "received_runs", "reserve", "start_run", "start_runs"]

What = Agent | Mapping[str, Any]  # an agent row, or a snapshot already bound (a fork's)


def start_runs(user: Any, agents: Sequence[What], question: str, *,
               history: list[dict[str, Any]] | None = None, places: int | None = None,
               claim: bool | str = False, timeout_cap_s: int | None = None,
               parent_run: Run | None = None, fork_seq: int | None = None) -> list[Run]:
    """One queued run of `question` per agent, all `user`'s, created only if `user` has room
    for `places` more runs going (None: one per run; 0: not limited — the terminal's runs, a
    code agent's call, an admitted experiment's pair), in one transaction with that check:
    room.RunLimit (its message says why) and nothing created.

    Each of `agents` is an Agent row, frozen now (`snapshot.create_run`: its input guardrails
    read the question first, `timeout_cap_s` lowers its total timeout), or a snapshot already
    bound to today's configuration (a fork's: `forks.plans.bind`), whose guardrails read the
    recorded question again. `claim`: True, the run is this process's at once (a page's "start"
    cannot launch it a second time; then `engine.submit` it); a string, that owner's (an
    experiment's workers); False, nobody's yet (its page's "start" claims it). `parent_run` and
    `fork_seq` say what a replay or fork follows. ValueError when an agent cannot run (its
    configuration cannot be frozen): nothing created."""
    worker = process_id() if claim is True else (claim or "")
    related = {"parent_run": parent_run, "fork_seq": fork_seq}
    with transaction.atomic():
        wanted = len(agents) if places is None else places
        if wanted > 0:
            ensure_room(user, wanted)
        return [_create(user, what, question, history, worker, timeout_cap_s, related)
                for what in agents]


def start_run(user: Any, agent: What, question: str, **options: Any) -> Run:
    """One run: `start_runs(user, [agent], question, **options)`."""
    return start_runs(user, [agent], question, **options)[0]


def reserve(user: Any, places: int) -> None:
    """Take `places` under `user`'s limit for runs that will be created later with places=0
    (an experiment's pairs); room.RunLimit when there is no room. Call it inside the
    transaction that creates what holds them, so that nothing is saved when it is refused."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("reserve() belongs inside the transaction that creates the runs' "
                           "holder")
    ensure_room(user, places)


def _create(user: Any, what: What, question: str, history: list[dict[str, Any]] | None,
            worker: str, timeout_cap_s: int | None, related: dict[str, Any]) -> Run:
    if isinstance(what, Agent):
        return create_run(what, user, question, history=history, timeout_cap_s=timeout_cap_s,
                          worker=worker, **related)
    return queued_run(dict(what), user, question, history=history, worker=worker, **related)


def received_runs(user: Any, fields: Sequence[Mapping[str, Any]]) -> list[Run]:
    """Runs that no process here executes: one per trace the OTLP receiver opens
    (agentlab.receiver), `running` from their first span, owned by RECEIVED (the start-up
    sweep leaves them to the receiver, which ends them), holding no place under the per-user
    limit. `fields`: each run's agent_name, input, started_at and agent_snapshot. Not saved:
    the receiver inserts them (one statement: a request may open a thousand traces), after
    giving a trace that came whole its run's final fields, so that its row is written once."""
    return [Run(user=user, agent=None, status="running", worker=RECEIVED, **f) for f in fields]



def gateway_run(user: Any, *, question: str, agent_name: str, snapshot: Mapping[str, Any],
                parent_run: Run | None = None, fork_seq: int | None = None) -> Run:
    """The run of an agent that calls its model through the gateway (agentlab.gateway):
    `running` from its first call, held by this process (the start-up sweep marks it
    interrupted if the process dies), taking a place under the per-user limit like any run
    going — the limit on concurrent gateway sessions is that one (room.RunLimit)."""
    with transaction.atomic():
        ensure_room(user, 1)
        return Run.objects.create(
            user=user, agent=None, agent_name=agent_name, input=question, status="running",
            agent_snapshot=dict(snapshot), worker=process_id(), started_at=timezone.now(),
            parent_run=parent_run, fork_seq=fork_seq)
