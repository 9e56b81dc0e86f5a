"""Who a gateway request is: its token, of scope `gateway`, asked on every request.

An agent sends many requests a second, so a token found good is remembered in this process
for AUTH_CACHE_S; a token revoked or a user changed here is forgotten at once (the signals
below), one revoked through another process stops working within AUTH_CACHE_S. A refusal is never
remembered: a wrong guess costs a lookup every time.
"""

from __future__ import annotations

import time
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db.models.signals import post_delete, post_save

from agentlab.tokens.auth import Authenticated, Refused, authenticate, presented
from agentlab.tokens.models import AccessToken

SCOPE = "gateway"
AUTH_CACHE_S = 2.0
MAX_CACHED = 10_000

_good: dict[str, tuple[Authenticated, float]] = {}


async def who(headers: dict[str, str]) -> Authenticated | Refused:
    token = presented(headers)
    if isinstance(token, str) and (hit := _good.get(token)) is not None:
        found, at = hit
        if time.monotonic() - at < AUTH_CACHE_S:
            return found
    answer = await sync_to_async(authenticate, thread_sensitive=False)(headers, SCOPE)
    if isinstance(answer, Authenticated) and isinstance(token, str):
        if len(_good) >= MAX_CACHED:
            _good.clear()
        _good[token] = (answer, time.monotonic())
    return answer


def forget(**_kwargs: Any) -> None:
    _good.clear()


post_save.connect(forget, sender=AccessToken, dispatch_uid="gateway-auth-token")
post_save.connect(forget, sender=settings.AUTH_USER_MODEL, dispatch_uid="gateway-auth-user")
post_delete.connect(forget, sender=AccessToken, dispatch_uid="gateway-auth-token-d")
