"""An access token row: who owns it, what it may do, and the hash of its secret, never the
secret itself (it is shown once, when it is made)."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

PREFIX = "al_"  # every token starts so: secret scanners and people can tell it is ours
SHOWN = 8  # characters after PREFIX kept in clear to identify a token on the page
NAME_CHARS = 80
MAX_TOKEN_CHARS = 200  # a longer credential is refused unread (nothing to hash)

SCOPES = [
    ("ingest", "Ingest: upload traces"),
    ("gateway", "Gateway: call models"),
]


def digest(token: str) -> str:
    """The stored hash of a token. A plain SHA-256 is enough here, unlike a password: the secret
    is 32 random bytes (secrets.token_urlsafe(32)), so no dictionary or brute force can reach it
    and a slow, salted hash (PBKDF2, argon2) would only add a slow step to every request."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_secret() -> str:
    return PREFIX + secrets.token_urlsafe(32)


class AccessToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="access_tokens")
    name = models.CharField(max_length=NAME_CHARS)
    scope = models.CharField(max_length=16, choices=SCOPES)
    # The SHOWN characters after PREFIX: not secret (the page shows them), and what a presented
    # token is looked up by before its hash is compared in constant time.
    prefix = models.CharField(max_length=SHOWN, db_index=True)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.name} ({self.scope}, {self.shown})"

    @property
    def shown(self) -> str:
        return f"{PREFIX}{self.prefix}…"

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def revoke(self) -> None:
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])


def active_count(user) -> int:
    return AccessToken.objects.filter(user=user, revoked_at__isnull=True).count()


def create_token(user, name: str, scope: str) -> tuple[AccessToken, str]:
    """A new token for `user`: its row and its secret, which is not kept anywhere. Refuses (a
    ValidationError) a blank or too long name, an unknown scope, and a token past the user's
    limit of active ones (AGENTLAB_MAX_TOKENS; 0 = no limit)."""
    name = " ".join((name or "").split())
    if not name:
        raise ValidationError("A token needs a name.")
    if len(name) > NAME_CHARS:
        raise ValidationError(f"A token's name is at most {NAME_CHARS} characters.")
    if scope not in dict(SCOPES):
        raise ValidationError(f"Unknown scope {scope!r}: one of {', '.join(dict(SCOPES))}.")
    limit = settings.AGENTLAB_MAX_TOKENS
    if limit and active_count(user) >= limit:
        raise ValidationError(f"At most {limit} active tokens each: revoke one first.")
    secret = new_secret()
    row = AccessToken.objects.create(user=user, name=name, scope=scope,
                                     prefix=secret[len(PREFIX):len(PREFIX) + SHOWN],
                                     digest=digest(secret))
    return row, secret
