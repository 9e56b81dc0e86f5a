"""A worker's lease (agentlab/workers/lease.py), without a database: when the heartbeat thread
and a run's fence stop the worker, and when they let it go on; and the run that keeps stopping
its workers (agentlab/workers/job.py, on the test database)."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from agentlab.workers import job
from agentlab.workers.lease import EXIT_LOST, Lease
from traces.models import Run, Step


class Stopped(Exception):
    pass


def stop(code: int) -> None:
    raise Stopped(code)


class Conn:
    """A connection whose beat finds the worker's row (`row`) or not."""

    def __init__(self, row: Any) -> None:
        self.row, self.beats = row, 0

    def execute(self, _sql: str, _params: list[Any]) -> Conn:
        self.beats += 1
        return self

    def fetchone(self) -> Any:
        return self.row


def lease(worker_id: int | None = 7, *, takeover_s: float = 3, stall_s: float = 60) -> Lease:
    return Lease("", SimpleNamespace(worker_id=worker_id), takeover_s=takeover_s,
                 stall_s=stall_s, exit=stop)


def test_a_beat_that_reaches_the_database_renews_the_lease() -> None:
    held = lease()
    held.last_sent -= 2.5
    conn = Conn(row=(7,))
    held.beat(conn)
    assert conn.beats == 1 and held.lapsed() < 1
    held.check()  # fresh: the run goes on


def test_a_lapsed_lease_stops_the_worker_before_a_step_and_before_a_beat() -> None:
    held = lease()
    held.last_sent -= 3.5  # past the takeover time: another worker may hold its runs now
    with pytest.raises(Stopped) as stopped:
        held.check()
    assert stopped.value.args == (EXIT_LOST,)
    conn = Conn(row=(7,))
    with pytest.raises(Stopped):
        held.beat(conn)
    assert conn.beats == 0  # it did not beat its way back


def test_a_loop_stalled_past_the_limit_stops_the_worker_a_shorter_stall_does_not() -> None:
    held = lease(stall_s=10)
    held.loop_seen = time.monotonic() - 8
    held.beat(Conn(row=(7,)))  # stalled, not for good: beaten for
    held.loop_seen = time.monotonic() - 11
    with pytest.raises(Stopped):
        held.beat(Conn(row=(7,)))
    never = lease(stall_s=0)
    never.loop_seen = time.monotonic() - 1000
    never.beat(Conn(row=(7,)))  # 0: never


def test_a_worker_whose_row_is_gone_stops_unless_it_is_stopping() -> None:
    with pytest.raises(Stopped):
        lease().beat(Conn(row=None))  # pruned as stalled by a worker starting
    stopping = lease()
    stopping.stopping = True
    stopping.beat(Conn(row=None))


def test_before_it_registers_the_lease_waits_and_after_it_unregisters_it_ends() -> None:
    held = lease(worker_id=None)
    held.last_sent -= 100  # a slow start
    conn = Conn(row=(7,))
    held.beat(conn)
    assert conn.beats == 0 and held.lapsed() < 1
    held.worker.worker_id = 7
    held.beat(conn)
    held.worker.worker_id = None  # unregistered at the end
    held.last_sent -= 100
    held.beat(conn)
    assert conn.beats == 1


@pytest.mark.django_db(transaction=True)
async def test_a_run_that_keeps_stopping_its_workers_ends_failed_instead_of_another_takeover(
        user) -> None:
    """Taken over more than MAX_TAKEOVERS times (each worker executing it stopped: its loop
    stalled for good), the run is not executed again: it ends failed, saying why, fenced by
    the execution that ended it."""
    run = await Run.objects.acreate(user=user, input="Stall.", agent_name="t", paradigm="react",
                                    status="running", worker="engine:gone:1/2@3.4#abcd")
    await job._execute(run.pk, None, attempts=job.MAX_TAKEOVERS + 1)
    ended = await Run.objects.aget(pk=run.pk)
    assert ended.status == "failed" and ended.finished_at is not None
    assert f"stopped {job.MAX_TAKEOVERS + 1} times" in ended.error
    assert "engine:gone:1/2@3.4#abcd" in ended.error
    assert ended.worker != "engine:gone:1/2@3.4#abcd" and "#" in ended.worker  # claimed here
    assert not await Step.objects.filter(run=run).aexists()  # nothing executed
