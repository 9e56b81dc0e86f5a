"""The API endpoints outside programs call, served straight from ASGI, past Django's middleware
stack: the gateway's OpenAI API (`/gateway/v1/…`) and the OTLP receiver (`POST /v1/traces`).

Why: an agent calls its model many times a second and waits for each reply, and an exporter
sends spans by the thousand, so the per-request cost is theirs. Django's ASGI handler runs each
request through the middleware (sessions, CSRF, messages, clickjacking, CSP, htmx…), which are
sync and hop to one shared thread and back, twice each, and sends the request signals
(close_old_connections, another hop). None of it applies here: these endpoints read no cookie
or session (a token is asked on each request), render no page, and touch the database only
from threads of their own (the token look-up, the writer thread).

What is kept: the body read as Django reads it (after the body caps in agentlab/asgi.py), the
Host header checked against ALLOWED_HOSTS, the URL resolved by the project's urlconf, the
response sent by Django's own ASGI code (streaming included), the view cancelled when the
client goes away, `X-Content-Type-Options: nosniff`, a whole body's `Content-Length` (as
CommonMiddleware sets it), and any error in the endpoint's own shape
(its `Endpoint.error`). Everything else (pages, the gateway's sessions and runner) goes
through Django as usual.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import DisallowedHost, RequestAborted
from django.core.handlers.asgi import ASGIHandler, ASGIRequest
from django.http import HttpResponseBase
from django.urls import Resolver404, ResolverMatch, get_urlconf, resolve

log = logging.getLogger(__name__)
# request, status, message -> the endpoint's error response in its own shape
ErrorShape = Callable[[ASGIRequest, int, str], HttpResponseBase]


@dataclass(frozen=True)
class Endpoint:
    path: re.Pattern[str]  # the request paths it serves
    name: str  # in its errors: "No gateway endpoint …", "The gateway failed …"
    error: ErrorShape


class FastAPI:
    def __init__(self, app: Any, endpoints: Sequence[Endpoint]) -> None:
        self.app, self.endpoints = app, tuple(endpoints)
        self.handler = ASGIHandler()  # its body reading and response sending only

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        endpoint = self._endpoint(scope)
        if endpoint is None:
            return await self.app(scope, receive, send)
        try:
            body = await self.handler.read_body(receive)
        except RequestAborted:
            return
        with closing(body):
            request = ASGIRequest(scope, body)
            response: HttpResponseBase | None = None
            try:
                # The client going away (RequestAborted from the listener) cancels the answer.
                # Once it is sent the listener is cancelled, never raised out of: an exception
                # through the group ties the request, its body and the ASGI frames into a
                # reference cycle only the garbage collector frees (~45 objects a call).
                async with asyncio.TaskGroup() as group:
                    listener = group.create_task(self.handler.listen_for_disconnect(receive))
                    response = await respond(endpoint, request)
                    response.headers.setdefault("X-Content-Type-Options", "nosniff")
                    if not response.streaming:
                        # As Django's CommonMiddleware sets it: without it daphne sends the
                        # body chunked, and the client parses the chunks.
                        response.headers.setdefault("Content-Length", str(len(
                            response.content)))
                    await self.handler.send_response(response, send)
                    listener.cancel()
            except* RequestAborted:
                pass
            finally:
                if response is not None:
                    _closed(response)

    def _endpoint(self, scope: dict[str, Any]) -> Endpoint | None:
        if scope["type"] != "http":
            return None
        path = scope.get("path") or ""
        return next((e for e in self.endpoints if e.path.match(path)), None)


@functools.lru_cache(maxsize=1024)
def _resolved(path: str, urlconf: str | None) -> ResolverMatch:
    """The project's URLs walked once per path (~0.3 ms a call otherwise: the gateway's come
    late among many); a client calls the same one or two paths over and over."""
    return resolve(path, urlconf)


def _closed(response: HttpResponseBase) -> None:
    """What Django's handler does once a response is sent (or its client left), less the
    request_finished signal (its receivers tidy the database connections of the thread that
    served a request; this path uses none on the loop): the response's closers run, among
    them the recording of the step whose reply this was (agentlab.gateway.answer)."""
    for closer in response._resource_closers:
        try:
            closer()
        except Exception:
            log.exception("closing an API response failed")
    response._resource_closers.clear()


async def respond(endpoint: Endpoint, request: ASGIRequest) -> HttpResponseBase:
    try:
        request.get_host()
    except DisallowedHost:
        return endpoint.error(request, 400, "This server does not answer for that host "
                                            "(ALLOWED_HOSTS).")
    try:
        match = _resolved(request.path_info, get_urlconf())
    except Resolver404:
        return endpoint.error(request, 404, f"No {endpoint.name} endpoint {request.path_info}.")
    try:
        return await match.func(request, *match.args, **match.kwargs)
    except Exception:
        log.exception("the %s failed on %s", endpoint.name, request.path_info)
        return endpoint.error(request, 500, f"The {endpoint.name} failed on this request.")
