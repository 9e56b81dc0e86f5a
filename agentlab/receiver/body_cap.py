"""Body limits of the endpoints outside callers post to (the OTLP receiver, the gateway),
before Django reads a byte of it.

Django's ASGI handler reads a request's whole body (to memory, then a temporary file) before
any view runs, so a view can only refuse a large body after it has been taken in. This ASGI
wrapper refuses one that declares too much (Content-Length) with the endpoint's 413 at once,
and stops one that sends more than it declared, or more than the limit without declaring
(chunked): Django then sees the client go away, reads no further, and answers nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from django.conf import settings

from agentlab.receiver import protocol

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

PATH = "/v1/traces"
App = Callable[[Scope, Receive, Send], Awaitable[None]]
# headers, limit -> (status, body, content type, extra headers) of the endpoint's 413
Refusal = Callable[[dict[str, str], int], tuple[int, bytes, str, dict[str, Any]]]


def receiver_refusal(headers: dict[str, str], limit: int
                     ) -> tuple[int, bytes, str, dict[str, Any]]:
    encoding = protocol.reply_encoding(headers)
    return protocol.error_reply(
        encoding, 413, f"The request is larger than {limit:,} bytes "
                       "(AGENTLAB_RECEIVER_MAX_BODY_BYTES): export smaller batches "
                       "(OTEL_BSP_MAX_EXPORT_BATCH_SIZE).")


class BodyCap:
    """Caps the bodies of the requests `match` picks at `limit()` bytes (the receiver's by
    default), answering a declared excess with `refusal`."""

    def __init__(self, app: App, *, match: Callable[[str], bool] = PATH.__eq__,
                 limit: Callable[[], int] = lambda: settings.AGENTLAB_RECEIVER_MAX_BODY_BYTES,
                 refusal: Refusal = receiver_refusal) -> None:
        self.app, self.match, self.limit, self.refusal = app, match, limit, refusal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.match(scope.get("path") or ""):
            return await self.app(scope, receive, send)
        limit = self.limit()
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers") or []}
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            return await _refuse(send, self.refusal(headers, limit))
        allowed = int(declared) if declared.isdigit() else limit
        taken = 0

        async def capped() -> Message:
            nonlocal taken
            message = await receive()
            if message["type"] == "http.request":
                taken += len(message.get("body") or b"")
                if taken > allowed:  # more than it said, or than any request may send
                    return {"type": "http.disconnect"}
            return message

        return await self.app(scope, capped, send)


async def _refuse(send: Send, refusal: tuple[int, bytes, str, dict[str, Any]]) -> None:
    status, body, content_type, extra = refusal
    response_headers = [(b"content-type", content_type.encode()),
                        (b"content-length", str(len(body)).encode()),
                        (b"connection", b"close")]
    response_headers += [(k.lower().encode(), str(v).encode()) for k, v in extra.items()]
    await send({"type": "http.response.start", "status": status, "headers": response_headers})
    await send({"type": "http.response.body", "body": body})
