"""One chat request of a gateway run, from the tool results it carries to the reply.

The session records what the request carries and holds it where the run's control says; the
reply comes from the record (a replay or fork), from the person (written at a hold), or from
the route's profile through Agent Lab's one model client (agentlab.llm.client: retries,
fallbacks, each server's dialect); then it is recorded and sent, as one chat.completion or as
a stream. With output guardrails on the route a stream is sent once the reply is checked: a
block must be able to stop what the agent gets.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

from django.http import HttpResponse, HttpResponseBase, StreamingHttpResponse

from agentlab.gateway.protocol import (
    ChatRequest,
    Chunks,
    GatewayError,
    completion,
    message_of,
    upstream_error,
)
from agentlab.gateway.routes import Route
from agentlab.gateway.session import Session
from agentlab.gateway.sessions import TABLE
from agentlab.guardrails.checks import Budget, Check, scan_text
from agentlab.guardrails.decisions import decide
from agentlab.llm.errors import LLMError
from agentlab.llm.types import ChatResult

log = logging.getLogger(__name__)


async def answer(session: Session, request: ChatRequest, route: Route) -> HttpResponse:
    session.in_flight += 1
    session.last_seen = time.monotonic()
    streaming = False
    try:
        await session.tool_results(request.messages)
        sent = dataclasses.replace(request, messages=session.substituted(request.messages))
        step, sent, ready = await session.open_call(sent, request.model)
        started = time.perf_counter()
        if ready is not None:
            await session.close_call(step, ready, started)
            TABLE.remember(session, request, message_of(ready))
            return _reply(request, ready)
        if request.stream and not route.has_output_checks:
            streaming = True
            return _after_sent(_stream(session, request, sent, route, step, started), session)
        result = TABLE.own_call_ids(session, await _call(session, sent, route, step))
        await session.close_call(step, result, started, sending=True)
        TABLE.remember(session, request, message_of(result))
        return _after_sent(_reply(request, result), session)
    finally:
        if not streaming:
            session.in_flight -= 1
            session.last_seen = time.monotonic()


async def _call(session: Session, sent: ChatRequest, route: Route, step: Any,
                on_token: Any = None) -> ChatResult:
    try:
        return await route.model.chat(
            sent.messages, tools=sent.tools, tool_choice=sent.tool_choice,
            response_format=sent.response_format, stop=sent.stop,
            temperature=sent.temperature, max_tokens=sent.max_tokens, on_token=on_token,
            extra=sent.extra)
    except LLMError as exc:
        await session.fail_call(step, str(exc), exc.kind)
        raise upstream_error(exc) from None
    except asyncio.CancelledError:
        await session.fail_call(step, "the client closed the connection before the reply")
        raise


def _after_sent(response: HttpResponseBase, session: Session) -> HttpResponseBase:
    """The step of this reply is recorded once the reply is out: when the response is closed
    (by Django's handler, or by agentlab.fast_api after its last byte)."""
    response._resource_closers.append(session.later.after_sent)
    return response


def _reply(request: ChatRequest, result: ChatResult) -> HttpResponse:
    if not request.stream:
        return json_response(completion(result, request.model))
    chunks = Chunks(request.model)

    async def events() -> AsyncIterator[bytes]:  # all of it at hand: one write
        text = [chunks.content(result.text)] if result.text else []
        yield b"".join([chunks.opening(), *text,
                        *chunks.ending(result, usage=request.include_usage)])

    return _sse(events())


def _stream(session: Session, request: ChatRequest, sent: ChatRequest, route: Route,
            step: Any, started: float) -> StreamingHttpResponse:
    """Tokens go to the agent as the model writes them; the step is recorded at the end."""
    chunks = Chunks(request.model)
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()

    async def on_token(delta: str) -> None:
        queue.put_nowait(chunks.content(delta))

    async def call() -> None:
        try:
            result = TABLE.own_call_ids(session,
                                        await _call(session, sent, route, step, on_token))
            await session.close_call(step, result, started, sending=True)
            TABLE.remember(session, request, message_of(result))
            for event in chunks.ending(result, usage=request.include_usage):
                queue.put_nowait(event)
        except GatewayError as exc:
            for event in chunks.error(exc):
                queue.put_nowait(event)
        except Exception:
            log.exception("gateway run %s: a streamed call failed", session.run_id)
            for event in chunks.error(GatewayError(500, "The gateway failed on this call.",
                                                   type="api_error")):
                queue.put_nowait(event)
        finally:
            queue.put_nowait(None)

    async def events() -> AsyncIterator[bytes]:
        task = asyncio.get_running_loop().create_task(call())
        try:
            yield chunks.opening()
            async with aclosing(_batches(queue)) as batches:
                async for batch in batches:
                    yield batch
        finally:
            if not task.done():  # the client went away: the call stops, the step says so
                task.cancel()
            session.in_flight -= 1
            session.last_seen = time.monotonic()

    return _sse(events())


async def _batches(queue: asyncio.Queue[bytes | None]) -> AsyncIterator[bytes]:
    """The events put on `queue` until None (nothing is put after it), those that came while
    the last batch went out joined into one: a model's server often sends many tokens in one
    packet, and each write is a pass through Django's and daphne's sending and a system call."""
    while True:
        events = [await queue.get()]
        while not queue.empty():
            events.append(queue.get_nowait())
        end = events[-1] is None
        if batch := b"".join(events[:-1] if end else events):
            yield batch
        if end:
            return


def _sse(events: AsyncIterator[bytes]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(events, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # a proxy in front must not hold the tokens
    return response


def json_response(body: dict[str, Any], status: int = 200,
                  headers: dict[str, str] | None = None) -> HttpResponse:
    response = HttpResponse(json.dumps(body, ensure_ascii=False, separators=(",", ":")),
                            status=status, content_type="application/json")
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def error_response(error: GatewayError) -> HttpResponse:
    return json_response(error.body(), error.status, error.headers)


def guard_input(request: ChatRequest, route: Route) -> ChatRequest:
    """The route's input guardrails on what the user says (user messages): redacted before
    the model, the database or a page sees it; a block refuses the request. Judges do not
    read gateway traffic (a judge is a model call of its own per message)."""
    checks = route.input_checks
    if not checks:
        return request
    budget, messages = Budget(), []
    for i, message in enumerate(request.messages):
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, str):
            messages.append(message)
            continue
        text = _guarded(content, checks, budget, f"question.{i}")
        messages.append({**message, "content": text} if text != content else message)
    return dataclasses.replace(request, messages=messages)


def guard_embedding(body: dict[str, Any], route: Route) -> dict[str, Any]:
    """The route's input guardrails on the texts of an embeddings request: what they redact
    or block does not reach the model there either."""
    checks, value = route.input_checks, body.get("input")
    if not checks:
        return body
    budget = Budget()
    if isinstance(value, str):
        return {**body, "input": _guarded(value, checks, budget, "question.input")}
    if isinstance(value, list):
        return {**body, "input": [_guarded(v, checks, budget, f"question.input.{i}")
                                  if isinstance(v, str) else v for i, v in enumerate(value)]}
    return body


def _guarded(text: str, checks: tuple[Check, ...], budget: Budget, path: str) -> str:
    """`text` as the checks leave it; a block refuses the request."""
    out, hits = scan_text(text, checks, subject=True, path=path, budget=budget)
    for decision in decide(hits, may_block=True):
        if decision["action"] == "block":
            raise GatewayError(400, f"Blocked by the guardrail {decision['guardrail']}: "
                                    f"{decision['message']}", code="guardrail_blocked",
                               retry=False)
    return out
