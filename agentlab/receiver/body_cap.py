"""The receiver's body limit, before Django reads a byte of it.

Django's ASGI handler reads a request's whole body (to memory, then a temporary file) before
any view runs, so a view can only refuse a large body after it has been taken in. This ASGI
wrapper refuses one that declares too much (Content-Length) with the receiver's 413 at once,
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


class BodyCap:
    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") != PATH:
            return await self.app(scope, receive, send)
        limit = settings.AGENTLAB_RECEIVER_MAX_BODY_BYTES
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers") or []}
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            return await _refuse(send, headers, limit)
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


async def _refuse(send: Send, headers: dict[str, str], limit: int) -> None:
    encoding = protocol.reply_encoding(headers)
    status, body, content_type, extra = protocol.error_reply(
        encoding, 413, f"The request is larger than {limit:,} bytes "
                       "(AGENTLAB_RECEIVER_MAX_BODY_BYTES): export smaller batches "
                       "(OTEL_BSP_MAX_EXPORT_BATCH_SIZE).")
    response_headers = [(b"content-type", content_type.encode()),
                        (b"content-length", str(len(body)).encode()),
                        (b"connection", b"close")]
    response_headers += [(k.lower().encode(), str(v).encode()) for k, v in extra.items()]
    await send({"type": "http.response.start", "status": status, "headers": response_headers})
    await send({"type": "http.response.body", "body": body})
