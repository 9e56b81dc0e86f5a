"""`POST /v1/traces`: OTLP/HTTP as the SDKs send it (docs/INTEROP.md "Send your agent's
traces here").

Every request is authorised on its own by a personal access token of scope `ingest`; its
size, rate and the decoding work in flight are checked before the body is decoded; decoding
(protobuf or JSON, gzip) happens in a thread, never on the event loop; the spans are stored
by the process's one writer thread (agentlab.runs.writer), and only then published to the
run's watchers: persist, then publish, as for Agent Lab's own runs.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from agentlab.receiver import chunks, closer, protocol, store
from agentlab.receiver.ratelimit import DecodeGate, RateLimiter
from agentlab.runs import fanout
from agentlab.runs.writer import WRITER
from agentlab.tokens.auth import Refused, authenticate
from traces.otel.decode import OTLPError, Span, traces
from traces.otel.importer import limits

log = logging.getLogger(__name__)

PROJECT_HEADER = "x-agentlab-project"
LIMITER = RateLimiter(spans_per_s=settings.AGENTLAB_RECEIVER_SPANS_PER_S,
                      burst=settings.AGENTLAB_RECEIVER_BURST_SPANS,
                      max_in_flight=settings.AGENTLAB_RECEIVER_MAX_IN_FLIGHT)
GATE = DecodeGate(settings.AGENTLAB_RECEIVER_MAX_DECODING)


@login_not_required  # a token, not a session: authorised below, request by request
@csrf_exempt  # no cookie is read, so no cross-site request forgery
async def receive_traces(request: HttpRequest) -> HttpResponse:
    encoding = protocol.reply_encoding(request.headers)
    if request.method != "POST":
        response = _answer(protocol.error_reply(encoding, 405, "Send OTLP trace data with POST."))
        response["Allow"] = "POST"
        return response
    try:
        protocol.check_length(request.headers,
                              max_bytes=settings.AGENTLAB_RECEIVER_MAX_BODY_BYTES)
    except protocol.ProtocolError as exc:
        return _error(encoding, exc.status, exc.message)
    auth = await sync_to_async(authenticate, thread_sensitive=False)(
        dict(request.headers), "ingest")
    if isinstance(auth, Refused):
        return _error(encoding, auth.status, auth.message)
    # Keyed by the user, not the token: twenty tokens must not make twenty shares.
    key = auth.user.pk
    if (wait := LIMITER.admit(key)) is not None:
        return _error(encoding, 429, "Too many spans or requests from this account just now; "
                                     "the exporter retries after Retry-After.", wait)
    try:
        return await _admitted(request, encoding, auth.user, key)
    finally:
        LIMITER.release(key)


async def _admitted(request: HttpRequest, encoding: protocol.Encoding, user: Any,
                    key: int) -> HttpResponse:
    if (wait := GATE.admit(key)) is not None:
        return _error(encoding, 503, "The receiver is decoding as much as it may at once; the "
                                     "exporter retries after Retry-After.", wait)
    try:
        body = request.read(settings.AGENTLAB_RECEIVER_MAX_BODY_BYTES + 1)
        groups = await asyncio.to_thread(_decode, dict(request.headers), body)
    except protocol.ProtocolError as exc:
        return _error(encoding, exc.status, exc.message)
    except OTLPError as exc:
        return _error(encoding, 400, f"This is not OTLP trace data: {exc}")
    finally:
        GATE.release(key)
    LIMITER.spend(key, sum(len(spans) for spans in groups.values()))
    if not groups:
        return _answer(protocol.reply(encoding))
    project = (request.headers.get(PROJECT_HEADER) or "").strip()[:200]
    receipt, failed = store.Receipt(), False
    try:
        await _store(user, project, chunks.admitted(groups, receipt), receipt)
    except Exception:
        log.exception("received spans could not be stored")
        failed = True
    if receipt.ending:  # the pieces stored may have ended traces, even if a later one failed
        try:
            publish(await WRITER.call(store.finish, receipt.ending))
        except Exception:  # stored, but not read whole yet: the quiet sweep will
            log.exception("received traces could not be read whole")
    closer.ensure_running()
    if failed:
        return _error(encoding, 503, "The spans could not all be stored just now. The "
                                     "exporter sends them again (those stored already are "
                                     "not stored twice).", 5)
    return _answer(protocol.reply(encoding, rejected=receipt.rejected,
                                  message="; ".join(receipt.reasons)))


async def _store(user: Any, project: str, groups: dict[str, list[Span]],
                 receipt: store.Receipt) -> None:
    """Store the spans a piece at a time, each piece published once committed (the live
    steps first; the whole read of what they ended after the last, `finish`): the first
    spans of a big request reach their watchers while the rest are stored, and the next
    piece is handed to the writer thread before this one's frames are made, so its SQL
    runs while they are."""
    parts = chunks.pieces(groups)
    if not parts:
        return
    pending = WRITER.call(store.receive, user, project, parts[0])
    for n in range(len(parts)):
        done = await pending
        if n + 1 < len(parts):
            pending = WRITER.call(store.receive, user, project, parts[n + 1])
        publish(done.events)
        done.events = []
        receipt.add(done)


def _decode(headers: dict[str, str], body: bytes) -> dict[str, list[Span]]:
    """The request's spans by trace id (in a thread: decompressing and parsing is CPU work
    that grows with the body)."""
    request = protocol.read_body(headers, body,
                                 max_bytes=settings.AGENTLAB_RECEIVER_MAX_BODY_BYTES,
                                 max_inflated=settings.AGENTLAB_RECEIVER_MAX_INFLATED_BYTES)
    try:
        return traces(request.data, limits(), allow_empty=True)
    except RecursionError:  # JSON nested past Python's parser
        raise OTLPError("nested too deep to read") from None


def publish(events: list[tuple[int, dict[str, Any]]]) -> None:
    """Hand the stored steps and statuses to the runs' watchers, in order."""
    for run_id, event in events:
        fanout.publish(run_id, event)


def _answer(reply: protocol.Reply) -> HttpResponse:
    response = HttpResponse(reply.body, status=reply.status, content_type=reply.content_type)
    for name, value in reply.headers.items():
        response[name] = value
    return response


def fast_error(request: HttpRequest, status: int, message: str) -> HttpResponse:
    """An error before or around the view (agentlab/fast_api.py), in the spec's shape."""
    return _error(protocol.reply_encoding(request.headers), status, message)


def _error(encoding: protocol.Encoding, status: int, message: str,
           retry_after: float | None = None) -> HttpResponse:
    return _answer(protocol.error_reply(encoding, status, message, retry_after=retry_after))
