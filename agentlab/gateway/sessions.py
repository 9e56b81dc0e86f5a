"""This process's gateway runs, and which one a request belongs to (`TABLE`).

In order: an explicit session in the URL (`/gateway/s/<key>/v1`, set by `manage.py attach`),
else the W3C `traceparent` header's trace id, else conversation continuity (a request that
extends an earlier request and its reply: agentlab.gateway.grouping), else a new run. The
index lives in memory, per process: the requests of one agent reach the process that holds
its run (one web process, or a load balancer that keeps a client on one); an explicit
session's run is also found from the database. A run that goes quiet for
AGENTLAB_GATEWAY_IDLE_S ends (succeeded with its last reply, failed when its last call
failed), its entries leave the index.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from agentlab.gateway import plans
from agentlab.gateway.grouping import conversation_keys, question, reply_key, trace_id
from agentlab.gateway.models import GatewaySession
from agentlab.gateway.protocol import ChatRequest, GatewayError
from agentlab.gateway.routes import Route
from agentlab.gateway.session import Session
from agentlab.guardrails.decisions import check_question
from agentlab.llm.types import ChatResult
from agentlab.runs.control import DebugSettings
from agentlab.runs.room import RunLimit
from agentlab.runs.start import gateway_run
from agentlab.runs.writer import WRITER
from traces.models import Step

log = logging.getLogger(__name__)
QUESTION_CHARS = 10_000  # of the first request's user message kept as the run's input


class Table:
    def __init__(self) -> None:
        self.sessions: dict[int, Session] = {}  # run id -> its session
        self.index: dict[tuple[int, str], int] = {}  # (user id, key) -> run id
        self.call_ids: dict[str, int] = {}  # tool call ids given to open runs -> run id
        self._opening: dict[tuple[int, str], asyncio.Lock] = {}
        self._closers: dict[asyncio.AbstractEventLoop, asyncio.Task[None]] = {}

    def held(self, user_id: int) -> int:
        return sum(s.held for s in self.sessions.values() if s.user_id == user_id)

    def _live(self, user_id: int, key: str) -> Session | None:
        run_id = self.index.get((user_id, key))
        session = self.sessions.get(run_id) if run_id is not None else None
        return session if session is not None and not session.ended else None

    async def find(self, user: Any, request: ChatRequest, route: Route, *,
                   session_key: str | None = None, traceparent: str | None = None) -> Session:
        """The session of this request, opened (with its run) when it is the first. A run
        keeps the trace id its first request carried, whatever grouped it: its received run
        (the same agent's spans) links to it by that."""
        trace = trace_id(traceparent)
        if session_key:
            return await self._explicit(user, session_key, request, route, trace or "")
        if trace is not None:
            key = f"t:{trace}"
            return self._live(user.pk, key) or await self._open_once(
                user, key, request, route, grouped_by="trace", trace=trace)
        for _end, key in _keys(request)[0]:
            if (found := self._live(user.pk, f"c:{key}")) is not None:
                return found
        return await self._open(user, request, route, grouped_by="conversation",
                                trace=trace or "")

    def remember(self, session: Session, request: ChatRequest, reply: dict[str, Any]) -> None:
        """The turn key a reply to `request` leaves: the agent's next request finds its run
        by it."""
        entry = (session.user_id, f"c:{reply_key(_keys(request)[1], reply)}")
        self.index[entry] = session.run_id
        session.keys.append(entry)

    def own_call_ids(self, session: Session, result: ChatResult) -> ChatResult:
        """`result` with tool call ids no other open run was given: a server that numbers its
        calls call_0, call_1… would otherwise make two agents' conversations one."""
        calls = []
        for call in result.tool_calls:
            holder = self.call_ids.get(call.id)
            if holder is not None and holder != session.run_id:
                call = dataclasses.replace(call, id=f"{call.id}-r{session.run_id}")
            self.call_ids[call.id] = session.run_id
            session.call_ids.append(call.id)
            calls.append(call)
        return dataclasses.replace(result, tool_calls=calls) if calls else result

    async def _explicit(self, user: Any, key: str, request: ChatRequest, route: Route,
                        trace: str) -> Session:
        if (found := self._live(user.pk, f"s:{key}")) is not None:
            return found
        row = await own_session(user, key)
        if row.ended_at is not None:
            raise GatewayError(409, "This gateway session has ended.", code="session_ended",
                               retry=False)
        if row.run_id is not None:  # opened by another process, or before a restart
            return await self._open_once(user, f"s:{key}", request, route, row=row,
                                         grouped_by="session", resume=row.run_id)
        return await self._open_once(user, f"s:{key}", request, route, row=row,
                                     grouped_by="session", trace=trace)

    async def _open_once(self, user: Any, key: str, request: ChatRequest, route: Route,
                         **options: Any) -> Session:
        """Open the session of `key` once, however many of its first requests come at once."""
        lock = self._opening.setdefault((user.pk, key), asyncio.Lock())
        try:
            async with lock:
                if (found := self._live(user.pk, key)) is not None:
                    return found
                session = await self._open(user, request, route, **options)
                self.index[(user.pk, key)] = session.run_id
                session.keys.append((user.pk, key))
                return session
        finally:
            if not lock.locked():
                self._opening.pop((user.pk, key), None)

    async def _open(self, user: Any, request: ChatRequest, route: Route, *,
                    grouped_by: str, row: GatewaySession | None = None, trace: str = "",
                    resume: int | None = None) -> Session:
        plan = None
        if resume is not None:
            seq = await _last_seq(resume)
            run_id = resume
        else:
            try:
                plan = (await sync_to_async(plans.plan_for, thread_sensitive=False)(row)
                        if row is not None else None)
            except plans.PlanError as exc:
                raise GatewayError(409, f"This session cannot follow its run: {exc}.",
                                   code="replay_impossible", retry=False) from None
            run_id, seq = await _new_run(user, request, route, row, grouped_by, trace), 0
        session = Session(run_id, user.pk, checks=route.checks, plan=plan,
                          hold_s=settings.AGENTLAB_GATEWAY_HOLD_S, seq=seq, on_end=self._forget,
                          held_now=lambda: self.held(user.pk))
        if row is not None and row.debug:  # the launcher's breakpoints, from the first call
            session.control.settings = DebugSettings.from_frame(row.debug)
        self.sessions[run_id] = session
        self._ensure_closer()
        return session

    def _forget(self, session: Session) -> None:
        self.sessions.pop(session.run_id, None)
        for entry in session.keys:
            if self.index.get(entry) == session.run_id:
                del self.index[entry]
        for call_id in session.call_ids:
            if self.call_ids.get(call_id) == session.run_id:
                del self.call_ids[call_id]

    def by_run(self, run_id: int) -> Session | None:
        return self.sessions.get(run_id)

    # ------------------------------------------------------------------ quiet runs end

    def _ensure_closer(self) -> None:
        loop = asyncio.get_running_loop()
        task = self._closers.get(loop)
        if task is None or task.done():
            for gone in [lp for lp in self._closers if lp.is_closed()]:
                self._closers.pop(gone, None)
            self._closers[loop] = loop.create_task(self._close_quiet_forever(),
                                                   name="gateway-closer")

    async def _close_quiet_forever(self) -> None:
        while self.sessions:
            await asyncio.sleep(max(0.05, min(30.0, settings.AGENTLAB_GATEWAY_IDLE_S / 4)))
            try:
                await self.close_quiet()
            except Exception:  # the database is away: try again next time
                log.exception("closing quiet gateway runs failed")

    async def close_quiet(self, idle_s: float | None = None) -> int:
        """End the runs quiet for `idle_s` (default AGENTLAB_GATEWAY_IDLE_S); how many."""
        idle = settings.AGENTLAB_GATEWAY_IDLE_S if idle_s is None else idle_s
        quiet = [s for s in list(self.sessions.values())
                 if not s.in_flight and not s.held and time.monotonic() - s.last_seen >= idle]
        for session in quiet:
            await session.end()
        return len(quiet)


def _keys(request: ChatRequest) -> tuple[list[tuple[int, str]], str]:
    """The request's grouping keys, worked out on first use: finding its run and
    remembering its reply read the same conversation."""
    if request.keys is None:
        request.keys = conversation_keys(request.messages)
    return request.keys


def unknown_session() -> GatewayError:
    return GatewayError(404, "Unknown gateway session.", code="session_not_found", retry=False)


async def own_session(user: Any, key: str) -> GatewaySession:
    """`user`'s session of `key` (with its source run); another user's key reads exactly like
    one that does not exist, on every endpoint that takes one."""
    row = await GatewaySession.objects.select_related("source").filter(
        key=key, user=user).afirst()
    if row is None:
        raise unknown_session()
    return row


async def _last_seq(run_id: int) -> int:
    found = await Step.objects.filter(run_id=run_id).aaggregate(last=Max("seq"))
    return found["last"] or 0


async def _new_run(user: Any, request: ChatRequest, route: Route, row: GatewaySession | None,
                   grouped_by: str, trace: str) -> int:
    following = row is not None and row.mode != "record"
    snapshot = {"gateway": {"model": request.model, "profile": route.profile.name,
                            "agent": route.agent, "grouped_by": grouped_by,
                            "trace_id": trace, "session": row.key if row else "",
                            "mode": row.mode if row else "record"}}
    if following:
        assert row is not None
        snapshot["replay"] = {"source_run": row.source_id, "fork_seq": row.fork_seq,
                              "edit": row.edit, "on_divergence": row.on_divergence}
    name = (row.name if row is not None and row.name else f"gateway · {request.model}")[:200]
    asked = question(request.messages)[:QUESTION_CHARS]
    if route.checks:  # the output checks ("everything recorded") mask the question too
        asked = (await sync_to_async(check_question, thread_sensitive=False)(
            asked, route.checks))[0]
    try:
        # On the recorder's writer thread: with SQLite, a second writer waits for the lock
        # by sleeping (up to 100 ms a time), so a new run beside the steps being written
        # stalled the agent's first call (the 50-client bench's worst first tokens).
        run = await WRITER.call(functools.partial(
            gateway_run, user, question=asked, agent_name=name,
            snapshot=snapshot, parent_run=row.source if following else None,
            fork_seq=row.fork_seq if following else None))
    except RunLimit as exc:
        raise GatewayError(429, str(exc), type="rate_limit_error", code="too_many_runs",
                           retry=False) from None
    if row is not None:
        await GatewaySession.objects.filter(pk=row.pk).aupdate(run=run)
    return run.pk


async def end_session(row: GatewaySession, exit_code: int | None) -> None:
    """The launcher says its program exited: end the session's run now."""
    session = TABLE.by_run(row.run_id) if row.run_id else None
    if session is not None and not session.ended:
        failed = exit_code not in (0, None)
        await session.end("failed" if failed else "",
                          error=f"The program exited with status {exit_code}." if failed else "")
    await GatewaySession.objects.filter(pk=row.pk).aupdate(ended_at=timezone.now(),
                                                           exit_code=exit_code)


TABLE = Table()
