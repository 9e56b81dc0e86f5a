"""The HTTP of a chat call: aiohttp under the openai SDK's client (agentlab.llm.transport).

Why: every model call of a run, and every call an agent makes through the gateway, waits for
this request. The SDK's httpx stack (httpx, httpcore, h11: Python all the way down, headers and
body written apart) cost ~0.9 ms of CPU a call on loopback; aiohttp (its HTTP parser in C,
keep-alive pooled) ~0.3 ms (`manage.py bench_gateway`; docs/GATEWAY.md "Performance").

What stays the SDK's: the URL and headers its client builds for a chat request (its key, its
user agent), its errors (a status error is made from the response as the SDK makes it), its
SSE parsing of a stream (an `httpx.Response` over this body). Transport failures come up as
the httpx exceptions the SDK's own client raises (`_as_httpx`), so timeouts, refused and dropped
connections read as they always have (agentlab.llm.errors); an https endpoint is trusted as
the SDK's client trusts it (httpx's certificate store, SSL_CERT_FILE included), and a proxy
is taken from the environment as it takes one. Not the SDK's `openai[aiohttp]`:
it reports a refused connection as a timeout and refuses a base URL with credentials.

One aiohttp session per SDK client (so dropping a client after a connection error starts
afresh, as before); each event loop closes its sessions when it shuts down (`_closed_with`:
aiohttp logs a session left open as an error).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import ssl
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import aiohttp.helpers
import httpx2 as httpx
import openai
import yarl
from openai._models import FinalRequestOptions

_PATH = "/chat/completions"
_SECURITY = {"bearer_auth": True}  # what chat.completions.create sends
# Headers of a reply that describe the bytes on the wire, which aiohttp has already decoded.
_WIRE_ONLY = frozenset({b"content-encoding", b"content-length", b"transfer-encoding"})


@dataclass
class Wire:
    session: aiohttp.ClientSession
    url: yarl.URL
    headers: dict[str, str]
    timeout: aiohttp.ClientTimeout
    request: httpx.Request  # what the SDK's errors name
    proxy: yarl.URL | None = None
    proxy_auth: aiohttp.BasicAuth | None = None


_WIRES: weakref.WeakKeyDictionary[openai.AsyncOpenAI, Wire] = weakref.WeakKeyDictionary()


def wire(client: openai.AsyncOpenAI) -> Wire:
    """The client's session, URL and headers for a chat call (made once per client)."""
    if (made := _WIRES.get(client)) is not None:
        return made
    options = FinalRequestOptions.construct(method="post", url=_PATH, security=_SECURITY)
    url = client._prepare_url(_PATH)
    headers = dict(client._build_headers(options))
    target = yarl.URL(str(url))
    if target.user is not None:
        # As httpx does: credentials in the base URL are sent as Basic auth, in the place of
        # the key's header (aiohttp would refuse the two together).
        pair = f"{target.user}:{target.password or ''}".encode()
        headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        target = target.with_user(None)
    seconds = _seconds(client.timeout)
    # No cookies kept between calls (the SDK keeps none either); no limit on connections
    # (the model's endpoint limit is agentlab.llm.gate's).
    session = aiohttp.ClientSession(
        cookie_jar=aiohttp.DummyCookieJar(),
        connector=aiohttp.TCPConnector(limit=0, ssl=ssl_context()))
    _closed_with(asyncio.get_running_loop(), session)
    try:  # a proxy from the environment, as httpx's client finds one: read once, not per call
        proxy, proxy_auth = aiohttp.helpers.get_env_proxy_for_url(target)
    except LookupError:
        proxy, proxy_auth = None, None
    made = _WIRES[client] = Wire(
        session, target, headers,
        # Per connect and per read, as the SDK's timeout is for httpx; no total.
        aiohttp.ClientTimeout(total=None, sock_connect=seconds, sock_read=seconds),
        httpx.Request("POST", url), proxy, proxy_auth)
    return made


@functools.cache
def ssl_context() -> ssl.SSLContext:
    """The certificates the SDK's httpx client trusts (certifi's, or SSL_CERT_FILE /
    SSL_CERT_DIR), made once per process and shared by every client's aiohttp session and
    httpx client (agentlab.llm.transport.ClientPool): loading them takes 30–170 ms of CPU
    here, and the SDK's own client loaded them again for each client it made, on the event
    loop — every call in flight stalled whenever a model's client was made (its first call,
    and again after each connection error)."""
    return httpx.create_ssl_context()


def _seconds(timeout: Any) -> float | None:
    if isinstance(timeout, int | float):
        return float(timeout)
    if isinstance(timeout, httpx.Timeout):
        return timeout.read
    return None


async def post(client: openai.AsyncOpenAI, body: bytes, *, stream: bool) -> httpx.Response:
    """POST `body` as the chat request; the reply as an httpx response the SDK reads (a
    stream's body read as it comes). A status ≥ 400 raises the SDK's error for it."""
    w = wire(client)
    try:
        response = await w.session.post(w.url, data=body, headers=w.headers, timeout=w.timeout,
                                        proxy=w.proxy, proxy_auth=w.proxy_auth)
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise _as_httpx(exc, w.request) from exc
    headers = [(k, v) for k, v in response.raw_headers if k.lower() not in _WIRE_ONLY]
    if stream and response.status < 400:
        return httpx.Response(response.status, headers=headers,
                              stream=_Body(response, w.request), request=w.request)
    try:
        content = await response.read()
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise _as_httpx(exc, w.request) from exc
    finally:
        response.release()
    reply = httpx.Response(response.status, headers=headers, content=content,
                           request=w.request)
    if reply.is_error:
        raise client._make_status_error_from_response(reply)
    return reply


class _Body(httpx.AsyncByteStream):
    """A streamed reply's body, as aiohttp reads it."""

    def __init__(self, response: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self.response, self.request = response, request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self.response.content.iter_any():
                yield chunk
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _as_httpx(exc, self.request) from exc

    async def aclose(self) -> None:
        self.response.release()


def _as_httpx(exc: BaseException, request: httpx.Request) -> httpx.HTTPError:
    """aiohttp's failure as the httpx error the SDK's own client raises for it."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(text, request=request)
    if isinstance(exc, TimeoutError):
        return httpx.ReadTimeout(text, request=request)
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return httpx.ConnectError(str(exc.certificate_error), request=request)
    if isinstance(exc, aiohttp.ClientConnectorError):  # its words, less the SSL context's repr
        return httpx.ConnectError(f"{exc.host}:{exc.port}: {exc.os_error}", request=request)
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return httpx.RemoteProtocolError(text, request=request)
    if isinstance(exc, aiohttp.ClientOSError):
        return httpx.ReadError(text, request=request)
    return httpx.TransportError(text, request=request)


async def close(client: openai.AsyncOpenAI) -> None:
    """Close the client's session (with the client: agentlab.llm.transport.ClientPool.drop)."""
    if (made := _WIRES.pop(client, None)) is not None:
        getattr(asyncio.get_running_loop(), _ATTRIBUTE, set()).discard(made.session)
        await made.session.close()


_ATTRIBUTE = "_agentlab_model_sessions"  # on the loop: the sessions it closes at shutdown


def _closed_with(loop: asyncio.AbstractEventLoop, session: aiohttp.ClientSession) -> None:
    """Close `session` when `loop` shuts down: an async generator started here is closed by
    the loop's `shutdown_asyncgens()` (asyncio.run, asgiref and pytest-asyncio call it), and
    its `finally` closes every session of the loop. Both are kept on the loop itself, not in
    a table keyed by it: the generator refers to its loop, and would keep it alive there."""
    sessions: set[aiohttp.ClientSession] | None = getattr(loop, _ATTRIBUTE, None)
    if sessions is None:
        sessions = set()

        async def closer() -> AsyncIterator[None]:
            try:
                yield
            finally:
                while sessions:
                    await sessions.pop().close()

        generator = closer()
        with contextlib.suppress(StopIteration):  # to its `yield`: the loop now tracks it
            generator.__anext__().send(None)
        setattr(loop, _ATTRIBUTE, sessions)
        setattr(loop, _ATTRIBUTE + "_closer", generator)
    sessions.add(session)
