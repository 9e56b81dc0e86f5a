"""The gateway's endpoints (docs/GATEWAY.md): `/gateway/v1/…` for any OpenAI-compatible
client, `/gateway/s/<session>/v1/…` for a program under `manage.py attach`, and the session
and runner calls the launcher makes.

Every request is authorised on its own by a personal access token of scope `gateway`; its
size (before Django reads it: BODY_CAP), the requests a minute and at once of its user are
checked before any work; decoding a large body happens in a thread.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from agentlab.gateway import auth, routes
from agentlab.gateway.answer import (
    answer,
    error_response,
    guard_embedding,
    guard_input,
    json_response,
)
from agentlab.gateway.protocol import MODEL_CHARS, GatewayError, error_body, parse_chat
from agentlab.gateway.sessions import TABLE, own_session, unknown_session
from agentlab.receiver.ratelimit import RateLimiter
from agentlab.tokens.auth import Refused

PREFIX = "/gateway/"
THREAD_ABOVE_BYTES = 64 * 1024  # JSON bodies past this are decoded in a thread
LIMITER = RateLimiter(spans_per_s=settings.AGENTLAB_GATEWAY_REQUESTS_PER_MIN / 60,
                      burst=max(1, settings.AGENTLAB_GATEWAY_REQUESTS_PER_MIN // 4),
                      max_in_flight=settings.AGENTLAB_GATEWAY_MAX_IN_FLIGHT)
RESPONSES_API = (
    "The gateway speaks the chat completions API (/v1/chat/completions), not the Responses "
    "API. Switch the client: the OpenAI Agents SDK with set_default_openai_api("
    "\"chat_completions\") (or OpenAIChatCompletionsModel); LangChain's ChatOpenAI with "
    "use_responses_api=False; the openai SDK with client.chat.completions.create(...).")


def _refusal(headers: dict[str, str], limit: int) -> tuple[int, bytes, str, dict[str, Any]]:
    body = json.dumps(error_body(f"The request is larger than {limit:,} bytes "
                                 "(AGENTLAB_GATEWAY_MAX_BODY_BYTES).",
                                 code="request_too_large")).encode()
    return 413, body, "application/json", {"x-should-retry": "false"}


BODY_CAP = {"match": lambda path: path.startswith(PREFIX),
            "limit": lambda: settings.AGENTLAB_GATEWAY_MAX_BODY_BYTES, "refusal": _refusal}


def gateway_view(view: Any) -> Any:
    """Token, rate and errors for every endpoint: `view(request, user, **kwargs)`."""

    @login_not_required  # a token, not a session: authorised below, request by request
    @csrf_exempt  # no cookie is read, so no cross-site request forgery
    async def wrapped(request: HttpRequest, **kwargs: Any) -> HttpResponse:
        found = await auth.who(_credentials(request))
        if isinstance(found, Refused):
            return error_response(GatewayError(
                found.status, found.message, type="authentication_error"
                if found.status == 401 else "permission_error", code=found.reason,
                retry=False))
        key = found.user.pk
        if (wait := LIMITER.admit(key)) is not None:
            return error_response(GatewayError(
                429, "Too many requests from this account just now "
                     "(AGENTLAB_GATEWAY_REQUESTS_PER_MIN, AGENTLAB_GATEWAY_MAX_IN_FLIGHT); "
                     "try again after Retry-After.", type="rate_limit_error",
                code="rate_limited", headers={"Retry-After": str(wait)}))
        LIMITER.spend(key, 1)
        release = _once(lambda: LIMITER.release(key))
        try:
            response = await view(request, found.user, **kwargs)
        except GatewayError as exc:
            release()
            return error_response(exc)
        except BaseException:
            release()
            raise
        if isinstance(response, StreamingHttpResponse):  # in flight to its last byte
            _release_after(response, release)
        else:
            release()
        return response

    return wrapped


def _credentials(request: HttpRequest) -> dict[str, str]:
    """The headers a token may come in (agentlab.tokens.auth.presented): only those, read
    from META (all of `request.headers` as a dict cost ~0.1 ms a call)."""
    meta = request.META
    return {name: meta[key] for name, key in (("Authorization", "HTTP_AUTHORIZATION"),
                                              ("X-Api-Key", "HTTP_X_API_KEY")) if key in meta}


def _once(work: Callable[[], None]) -> Callable[[], None]:
    done = False

    def once() -> None:
        nonlocal done
        if not done:
            done = True
            work()

    return once


def _release_after(response: StreamingHttpResponse, release: Callable[[], None]) -> None:
    """`release` when the stream ends, however it ends: the closer is for one the client
    left before its first byte (Django closes every response it sent, or began to)."""
    content = response.streaming_content

    async def then_release() -> AsyncIterator[bytes]:
        try:
            async for part in content:
                yield part
        finally:
            release()

    response.streaming_content = then_release()
    response._resource_closers.append(release)


def _allow(request: HttpRequest, method: str) -> None:
    if request.method != method:
        raise GatewayError(405, f"Use {method} here.", headers={"Allow": method})


async def read_json(request: HttpRequest) -> Any:
    body = request.body
    try:
        if len(body) > THREAD_ABOVE_BYTES:
            return await asyncio.to_thread(json.loads, body)
        return json.loads(body)
    except (ValueError, RecursionError):
        raise GatewayError(400, "The request body is not JSON.") from None


@gateway_view
async def chat_completions(request: HttpRequest, user: Any, session: str | None = None
                           ) -> HttpResponse:
    _allow(request, "POST")
    chat = parse_chat(await read_json(request))
    route = routes.cached(chat.model) or await sync_to_async(
        routes.route, thread_sensitive=False)(chat.model)
    chat = guard_input(chat, route) if not route.input_off_loop else await asyncio.to_thread(
        guard_input, chat, route)
    found = await TABLE.find(user, chat, route, session_key=session,
                             traceparent=request.META.get("HTTP_TRACEPARENT"))
    if found.user_id != user.pk:  # never: the index is keyed by user; kept as a tripwire
        raise unknown_session()
    response = await answer(found, chat, route)
    response["x-agentlab-run"] = str(found.run_id)
    return response


async def _known(user: Any, session: str | None) -> None:
    """A session key in the URL that is not the user's reads as unknown on every endpoint
    (chat finds its run by it: agentlab.gateway.sessions), never as any answer at all."""
    if session:
        await own_session(user, session)


@gateway_view
async def models(request: HttpRequest, user: Any, session: str | None = None) -> HttpResponse:
    _allow(request, "GET")
    await _known(user, session)
    names = await sync_to_async(routes.model_names, thread_sensitive=False)()
    return json_response({"object": "list", "data": [
        {"id": name, "object": "model", "created": 0, "owned_by": "agentlab"}
        for name in names]})


@gateway_view
async def embeddings(request: HttpRequest, user: Any, session: str | None = None
                     ) -> HttpResponse:
    """Passed through to the route's profile as they are but for what the route's input
    guardrails redact or block (not recorded: not a step)."""
    _allow(request, "POST")
    await _known(user, session)
    body = await read_json(request)
    if not isinstance(body, dict) or not isinstance(body.get("model"), str):
        raise GatewayError(400, "'model' is required.", param="model")
    if len(body["model"]) > MODEL_CHARS:
        raise GatewayError(400, f"'model' is at most {MODEL_CHARS} characters.", param="model")
    route = await sync_to_async(routes.route, thread_sensitive=False)(body["model"])
    body = guard_embedding(body, route) if not route.input_off_loop else (
        await asyncio.to_thread(guard_embedding, body, route))
    return json_response(await routes.embed(route, body))


@gateway_view
async def responses(request: HttpRequest, user: Any, session: str | None = None
                    ) -> HttpResponse:
    await _known(user, session)
    raise GatewayError(400, RESPONSES_API, code="responses_api_not_supported", retry=False)
