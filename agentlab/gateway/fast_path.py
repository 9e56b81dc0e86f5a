"""The gateway's OpenAI API served straight from ASGI, past Django's middleware stack.

Why: an agent calls its model many times a second and waits for each reply, so every
millisecond the gateway adds is the agent's. Django's ASGI handler runs each request through
the middleware (sessions, CSRF, messages, clickjacking, CSP, htmx…), which are sync and hop to
one shared thread and back, twice each, and sends the request signals (close_old_connections,
another hop): most of what the gateway added per call (`manage.py bench_gateway`). None of it
applies here: the API reads no cookie or session (a token is asked on each request), renders
no page, and touches the database only from threads of its own (the token look-up, the run's
writer thread).

What is kept: the body read as Django reads it (after the body cap in agentlab/asgi.py), the
Host header checked against ALLOWED_HOSTS, the URL resolved by the project's urlconf, the
response sent by Django's own ASGI code (streaming included), the view cancelled when the
client goes away, `X-Content-Type-Options: nosniff`, and any error an OpenAI-shaped answer.
Everything else under /gateway/ (sessions, the runner, the job pages) goes through Django as
usual.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from contextlib import closing
from typing import Any

from django.core.exceptions import DisallowedHost, RequestAborted
from django.core.handlers.asgi import ASGIHandler, ASGIRequest
from django.http import HttpResponseBase
from django.urls import Resolver404, ResolverMatch, get_urlconf, resolve

from agentlab.gateway.answer import error_response
from agentlab.gateway.protocol import GatewayError

log = logging.getLogger(__name__)
API = re.compile(r"^/gateway/(?:s/[^/]+/)?v1/")


class FastGateway:
    def __init__(self, app: Any) -> None:
        self.app = app
        self.handler = ASGIHandler()  # its body reading and response sending only

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not API.match(scope.get("path") or ""):
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
                    response = await respond(request)
                    await self.handler.send_response(response, send)
                    listener.cancel()
            except* RequestAborted:
                pass
            finally:
                if response is not None:
                    _closed(response)


@functools.lru_cache(maxsize=1024)
def _resolved(path: str, urlconf: str | None) -> ResolverMatch:
    """The project's URLs walked once per path (~0.3 ms a call otherwise: the gateway's come
    late among many); an agent calls the same one or two paths over and over."""
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
            log.exception("closing a gateway response failed")
    response._resource_closers.clear()


async def respond(request: ASGIRequest) -> HttpResponseBase:
    try:
        request.get_host()
    except DisallowedHost:
        return error_response(GatewayError(400, "This server does not answer for that host "
                                                "(ALLOWED_HOSTS)."))
    try:
        match = _resolved(request.path_info, get_urlconf())
    except Resolver404:
        return error_response(GatewayError(404, f"No gateway endpoint {request.path_info}."))
    try:
        response = await match.func(request, *match.args, **match.kwargs)
    except Exception:
        log.exception("the gateway failed on %s", request.path_info)
        return error_response(GatewayError(500, "The gateway failed on this request.",
                                           type="api_error"))
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    return response
