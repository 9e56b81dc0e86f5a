"""Posts to the OTLP receiver through the project's ASGI application (body caps, the path past
the middleware, agentlab/fast_api.py), as daphne serves it, without a server process: an
httpx response (status_code, headers, content)."""

from __future__ import annotations

import httpx2 as httpx

from agentlab.asgi import http

PROTOBUF = "application/x-protobuf"


async def post_traces(body: bytes, *, content_type: str = PROTOBUF, path: str = "/v1/traces",
                      cookies: dict[str, str] | None = None, **headers: str) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=http),
                                 base_url="http://localhost", cookies=cookies) as client:
        return await client.post(path, content=body,
                                 headers={"Content-Type": content_type, **headers})
