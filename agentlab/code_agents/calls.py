"""Calling a code-declared agent from Python: each call is an ordinary recorded Run of its
Agent row (`runs.start.start_run` -> `runs.execution.execute_run`, as `run_agent` does), so
it has a trace, and replay, fork and diff work on it. A typed answer that does not fit its
type is asked again (a new run, the error shown to the model) at most `retries` times. A
session's turns are a chat Conversation, whose last `memory` turns are the run's history."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async

from agentlab.code_agents.declaration import Declaration
from agentlab.code_agents.output import ShapeError

CODE_USER = "code"  # who owns a call's runs when no user= is given (made on first use)


class AgentCallError(RuntimeError):
    """A call that ended without a value; `run_id` is its last run, `run_ids` all of them."""

    def __init__(self, message: str, *, run_ids: list[int], error: str) -> None:
        super().__init__(message)
        self.run_ids = tuple(run_ids)
        self.run_id = run_ids[-1] if run_ids else None
        self.error = error


class AgentRunFailed(AgentCallError):
    """The run ended without an answer (failed, timed out, cancelled): `status`, `error`."""

    def __init__(self, message: str, *, run_ids: list[int], error: str, status: str) -> None:
        super().__init__(message, run_ids=run_ids, error=error)
        self.status = status


class AgentOutputError(AgentCallError):
    """Every attempt answered something that is not the declared type; `error` is the last
    validation error, `answer` the last answer."""

    def __init__(self, message: str, *, run_ids: list[int], error: str, answer: str) -> None:
        super().__init__(message, run_ids=run_ids, error=error)
        self.answer = answer


class RunningLoopError(RuntimeError):
    """The sync form was called inside a running event loop, which it would block."""


@dataclass(frozen=True)
class AgentResult:
    """What a call gives back with `.run(...)` / `.arun(...)`: the typed value, the answer's
    text, the run that gave it and every run of the call (a retry is a run)."""

    value: Any
    answer: str
    run_id: int
    run_ids: tuple[int, ...]


class Caller:
    """Calls one declared agent with fixed options: the owner of its runs and a session."""

    def __init__(self, declaration: Declaration, *, user: Any = None,
                 conversation: str | None = None) -> None:
        self.declaration = declaration
        self.user = user
        self.conversation = conversation

    def session(self, key: str, *, user: Any = None) -> Caller:
        """The same agent remembering the last `memory` turns of conversation `key` (per
        owner); the turns are a chat conversation titled `key`, shown in Chat to its owner."""
        if not key or len(key) > 200:
            raise ValueError("a session key is 1 to 200 characters")
        return Caller(self.declaration, user=user or self.user, conversation=key)

    def as_user(self, user: Any) -> Caller:
        """The same agent whose runs belong to `user` (a user or a username)."""
        return Caller(self.declaration, user=user, conversation=self.conversation)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the agent and return its typed answer (sync; see `acall` inside a loop)."""
        return self.run(*args, **kwargs).value

    async def acall(self, *args: Any, **kwargs: Any) -> Any:
        return (await self.arun(*args, **kwargs)).value

    def run(self, *args: Any, **kwargs: Any) -> AgentResult:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return async_to_sync(self.arun)(*args, **kwargs)
        name = self.declaration.name
        raise RunningLoopError(f"{name}(…) was called inside a running event loop, which it "
                               f"would block for the whole run: use `await {name}.acall(…)`")

    async def arun(self, *args: Any, **kwargs: Any) -> AgentResult:
        from agentlab.runs.execution import execute_run
        from traces.schema import ANSWERED_STATUSES

        d = self.declaration
        question = d.user_message(*args, **kwargs)
        row, owner, conversation_id, memory = await sync_to_async(self._prepare)()
        run_ids: list[int] = []
        feedback: list[dict[str, str]] = []
        for _attempt in range(d.retries + 1):
            run = await sync_to_async(_create_run)(row, owner, question, memory + feedback)
            run_ids.append(run.pk)
            outcome = await execute_run(run)
            if outcome.status not in ANSWERED_STATUSES:
                raise AgentRunFailed(
                    f"{d.name}: run {run.pk} ended {outcome.status}: {outcome.error}",
                    run_ids=run_ids, error=outcome.error or "", status=outcome.status)
            answer = outcome.answer or ""
            try:
                value = d.output.parse(answer)
            except ShapeError as exc:
                error = str(exc)
                # The question as the run stored it (the guardrails' masks kept), never the
                # caller's original: the retry's history is stored, sent and exported.
                feedback = [{"role": "user", "content": run.input},
                            {"role": "assistant", "content": answer},
                            {"role": "user", "content": correction(error)}]
                continue
            if conversation_id is not None:
                await sync_to_async(_add_turn)(conversation_id, run)
            return AgentResult(value, answer, run.pk, tuple(run_ids))
        raise AgentOutputError(
            f"{d.name}: {len(run_ids)} answer(s) did not match "
            f"{getattr(d.output.annotation, '__name__', d.output.annotation)}, the last (run "
            f"{run_ids[-1]}): {error}", run_ids=run_ids, error=error, answer=answer)

    def _prepare(self) -> tuple[Any, Any, int | None, list[dict[str, str]]]:
        """The synced row, the owner, the session's conversation and its remembered turns."""
        from agentlab.chat.models import Conversation
        from agentlab.chat.turns import history_of

        row = agent_row(self.declaration)
        owner = owner_of(self.user)
        if self.conversation is None:
            return row, owner, None, []
        mine = Conversation.objects.filter(agent=row, user=owner, title=self.conversation)
        conversation = mine.order_by("-updated").first() or mine.create(
            agent=row, user=owner, title=self.conversation)
        keep = 2 * self.declaration.memory
        memory = history_of(conversation)[-keep:] if keep else []
        return row, owner, conversation.pk, memory


def correction(error: str) -> str:
    """What the model is told after an answer of the wrong shape."""
    return (f"That answer does not match the required JSON schema: {error}. Answer the same "
            "question again with only the JSON value.")


_SYNCED: set[tuple[str, str]] = set()  # (name, code_ref) synced by this process


def agent_row(declaration: Declaration) -> Any:
    """The declaration's Agent row, synced the first time this process calls it (and again
    whenever the row is gone)."""
    from agentlab.code_agents.rows import sync
    from agentlab.models import Agent

    key = (declaration.name, declaration.code_ref)
    row = Agent.objects.filter(name=declaration.name, code_ref=declaration.code_ref).first()
    if row is None or key not in _SYNCED:
        row = sync(declaration)
        _SYNCED.add(key)
    return row


def owner_of(user: Any) -> Any:
    """A user (or a username) as given, else the `code` user (no password, cannot log in)."""
    from django.contrib.auth import get_user_model

    User = get_user_model()
    if user is None:
        owner, made = User.objects.get_or_create(username=CODE_USER,
                                                 defaults={"is_active": False})
        if made:
            owner.set_unusable_password()
            owner.save(update_fields=["password"])
        return owner
    if isinstance(user, str):
        try:
            return User.objects.get(username=user)
        except User.DoesNotExist:
            raise ValueError(f"no user named {user!r}") from None
    return user


def _create_run(row: Any, owner: Any, question: str, history: list[dict[str, str]]) -> Any:
    from agentlab.runs import start

    # Claimed by this process at once: a page's "start" never picks it up. A call from code is
    # its caller's, like the terminal's runs: not limited (places=0).
    return start.start_run(owner, row, question, history=history, claim=True, places=0)


def _add_turn(conversation_id: int, run: Any) -> None:
    from django.db import transaction

    from agentlab.chat.models import ChatTurn, Conversation

    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=conversation_id)
        ChatTurn.objects.create(conversation=conversation, run=run,
                                position=conversation.turns.count() + 1)
        conversation.save()  # bumps `updated`: it moves up the chat list
