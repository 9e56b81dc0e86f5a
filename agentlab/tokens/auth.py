"""Who a request's token belongs to: `authenticate(headers, scope)`.

It accepts the headers people already send: `Authorization: Bearer <token>`,
`x-api-key: <token>`, and `Authorization: Basic base64(anything:<token>)` (the token as the
password). It answers the token's user, or a `Refused` with a reason; the caller decides the
status (`Refused.status` is the usual one: 403 for a token without the scope, else 401)."""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.utils import timezone

from agentlab.tokens.models import MAX_TOKEN_CHARS, PREFIX, SHOWN, AccessToken, digest

# last_used_at is written at most this often per token: not a write per request.
TOUCH_EVERY = timedelta(minutes=1)

REASONS = {
    "missing": "No token: send Authorization: Bearer <token>, x-api-key, or Basic auth.",
    "malformed": "The credentials are not a token of this server.",
    "unknown": "Unknown token.",
    "revoked": "This token was revoked.",
    "inactive": "This token's account is deactivated.",
    "scope": "This token may not be used here (wrong scope).",
}


@dataclass(frozen=True)
class Refused:
    reason: str  # a key of REASONS

    @property
    def message(self) -> str:
        return REASONS[self.reason]

    @property
    def status(self) -> int:
        return 403 if self.reason == "scope" else 401


@dataclass(frozen=True)
class Authenticated:
    user: Any
    token: AccessToken


def presented(headers: Mapping[str, str]) -> str | Refused:
    """The token the headers carry (names case-insensitive), or why there is none."""
    lower = {k.lower(): v for k, v in headers.items()}
    authorization = (lower.get("authorization") or "").strip()
    scheme, _, value = authorization.partition(" ")
    value = value.strip()
    if scheme.lower() == "bearer":
        return value or Refused("malformed")
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return Refused("malformed")
        _user, colon, password = decoded.partition(":")
        return password if colon and password else Refused("malformed")
    api_key = (lower.get("x-api-key") or "").strip()
    if api_key:
        return api_key
    return Refused("malformed") if authorization else Refused("missing")


def authenticate(headers: Mapping[str, str], scope: str) -> Authenticated | Refused:
    token = presented(headers)
    if isinstance(token, Refused):
        return token
    if not token.startswith(PREFIX) or len(token) > MAX_TOKEN_CHARS:
        return Refused("malformed")
    wanted = digest(token)
    prefix = token[len(PREFIX):len(PREFIX) + SHOWN]
    # The lookup is by the prefix the page shows anyway; the secret part is compared in
    # constant time, so response times say nothing about how much of a guess was right.
    found = next((row for row in AccessToken.objects.select_related("user").filter(prefix=prefix)
                  if hmac.compare_digest(row.digest, wanted)), None)
    if found is None:
        return Refused("unknown")
    if found.revoked_at is not None:
        return Refused("revoked")
    if not found.user.is_active:
        return Refused("inactive")
    if found.scope != scope:
        return Refused("scope")
    touch(found)
    return Authenticated(found.user, found)


def touch(token: AccessToken) -> None:
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= TOUCH_EVERY:
        AccessToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
