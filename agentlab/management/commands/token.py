"""`manage.py token create USERNAME --scope ingest [--name NAME]`: make an access token and print
it (only it, on stdout, so a script can capture it); `token list USERNAME`: a user's tokens,
never their secrets; `token revoke ID`."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from agentlab.tokens.models import SCOPES, AccessToken, create_token


def _when(value: Any) -> str:
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M") if value else "-"


class Command(BaseCommand):
    help = "Create, list and revoke personal access tokens."

    def add_arguments(self, parser: Any) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        create = actions.add_parser("create", help="make a token and print it (shown once)")
        create.add_argument("username")
        create.add_argument("--scope", required=True, choices=[key for key, _ in SCOPES])
        create.add_argument("--name", default="", help="default: 'manage.py token' and the date")
        listing = actions.add_parser("list", help="a user's tokens (never their secrets)")
        listing.add_argument("username")
        revoke = actions.add_parser("revoke", help="revoke a token by its id")
        revoke.add_argument("id", type=int)

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        if action == "revoke":
            token = AccessToken.objects.filter(pk=options["id"]).first()
            if token is None:
                raise CommandError(f"no token with id {options['id']}")
            token.revoke()
            self.stderr.write(f"Revoked token {token.pk} ({token}) of {token.user}.")
            return
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"no user {options['username']!r}")
        if action == "list":
            for t in AccessToken.objects.filter(user=user):
                self.stdout.write("\t".join([
                    str(t.pk), t.name, t.scope, t.shown, _when(t.created_at),
                    _when(t.last_used_at), "revoked " + _when(t.revoked_at) if t.revoked_at
                    else "active"]))
            return
        name = options["name"] or f"manage.py token {timezone.localdate():%Y-%m-%d}"
        try:
            _row, secret = create_token(user, name, options["scope"])
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        self.stdout.write(secret)
