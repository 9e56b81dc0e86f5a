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

from agentlab.receiver import closer, protocol, store
from agentlab.receiver.ratelimit import LIMITER
from agentlab.runs import fanout
from agentlab.runs.writer import WRITER
from agentlab.tokens.auth import Refused, authenticate
from traces.otel.decode import OTLPError, Span, traces
from traces.otel.importer import limits

log = logging.getLogger(__name__)

PROJECT_HEADER = "x-agentlab-project"


@login_not_required  # a token, not a session: authorised below, request by request
@csrf_exempt  # no cookie is read, so no cross-site request forgery
async def receive_traces(request: HttpRequest) -> HttpResponse:
    encoding = protocol.encoding_of(request.headers)
    if request.method != "POST":
        response = _error(encoding, 405, "Send OTLP trace data with POST.")
        response["Allow"] = "POST"
        return response
    auth = await sync_to_async(authenticate, thread_sensitive=False)(
        dict(request.headers), "ingest")
    if isinstance(auth, Refused):
        return _error(encoding, auth.status, auth.message)
    declared = request.headers.get("Content-Length") or ""
    if declared.isdigit() and int(declared) > settings.AGENTLAB_RECEIVER_MAX_BODY_BYTES:
        return _error(encoding, 413, _too_large())
    key = auth.token.pk
    with LIMITER.request(key) as wait:
        if wait is not None:
            return _error(encoding, 429 if wait.why != "busy" else 503, wait.message,
                          retry_after=wait.seconds)
        body = request.read(settings.AGENTLAB_RECEIVER_MAX_BODY_BYTES + 1)
        if len(body) > settings.AGENTLAB_RECEIVER_MAX_BODY_BYTES:
            return _error(encoding, 413, _too_large())
        try:
            groups = await asyncio.to_thread(_decode, dict(request.headers), body)
        except protocol.ProtocolError as exc:
            return _error(encoding, exc.status, exc.message)
        except OTLPError as exc:
            return _error(encoding, 400, f"This is not OTLP trace data: {exc}")
        count = sum(len(spans) for spans in groups.values())
        if (wait := LIMITER.spans(key, count)) is not None:
            return _error(encoding, 429, wait.message, retry_after=wait.seconds)
        if not groups:
            return _reply(encoding)
        project = (request.headers.get(PROJECT_HEADER) or "").strip()[:200]
        try:
            receipt = await WRITER.call(store.receive, auth.user, project, groups)
        except Exception:
            log.exception("received spans could not be stored")
            return _error(encoding, 503, "The spans could not be stored just now; nothing of "
                                         "them was kept. Send them again.", retry_after=5)
    publish(receipt.events)
    closer.ensure_running()
    return _reply(encoding, receipt.rejected, "; ".join(receipt.reasons))


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


def _too_large() -> str:
    limit = settings.AGENTLAB_RECEIVER_MAX_BODY_BYTES
    return (f"The request is larger than {limit:,} bytes (AGENTLAB_RECEIVER_MAX_BODY_BYTES): "
            "export smaller batches (OTEL_BSP_MAX_EXPORT_BATCH_SIZE).")


def _reply(encoding: str, rejected: int = 0, message: str = "") -> HttpResponse:
    status, body, content_type = protocol.reply(encoding, rejected=rejected, message=message)
    return HttpResponse(body, status=status, content_type=content_type)


def _error(encoding: str, status: int, message: str,
           retry_after: int | None = None) -> HttpResponse:
    status, body, content_type, headers = protocol.error_reply(
        encoding, status, message, retry_after=retry_after)
    response = HttpResponse(body, status=status, content_type=content_type)
    for name, value in headers.items():
        response[name] = value
    return response
