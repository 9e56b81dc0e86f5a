"""Personal access tokens (agentlab/tokens/): the page, `manage.py token`, and `authenticate`
under each header form people send."""

from __future__ import annotations

import base64
import re
from datetime import timedelta
from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.utils import timezone

from agentlab.tokens.auth import TOUCH_EVERY, Authenticated, Refused, authenticate, presented
from agentlab.tokens.models import AccessToken, create_token, digest

pytestmark = pytest.mark.django_db

TOKEN_RE = re.compile(r"al_[A-Za-z0-9_-]{43}")


def command(*args: str) -> str:
    out = StringIO()
    call_command("token", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def bearer(t: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {t}"}


def basic(t: str, user: str = "anything") -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{t}".encode()).decode()}


HEADER_FORMS = {
    "bearer": bearer,
    "bearer, lower-case scheme and name": lambda t: {"authorization": f"bearer {t}"},
    "x-api-key": lambda t: {"x-api-key": t},
    "X-Api-Key as Django's request.headers spells it": lambda t: {"X-Api-Key": t},
    "basic, token as the password": basic,
    "basic, empty user name": lambda t: basic(t, user=""),
}


@pytest.fixture
def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


# -- the page ---------------------------------------------------------------------------------

def test_the_page_creates_a_token_and_shows_it_once(logged_in, user):
    response = logged_in.post("/tokens/", {"name": "CI upload", "scope": "ingest"})
    assert response.status_code == 200
    page = response.content.decode()
    [secret] = TOKEN_RE.findall(page)
    assert "shown only this once" in page
    assert "no-store" in response["Cache-Control"]
    row = AccessToken.objects.get(user=user)
    assert (row.name, row.scope, row.revoked_at) == ("CI upload", "ingest", None)
    assert isinstance(authenticate(bearer(secret), "ingest"), Authenticated)
    # The list, visited again, shows the name and the prefix, never the secret.
    again = logged_in.get("/tokens/").content.decode()
    assert "CI upload" in again and row.shown in again and secret[:11] in again
    assert secret not in again and not TOKEN_RE.search(again)


def test_the_page_refuses_a_blank_name_an_unknown_scope_and_past_the_limit(
        logged_in, user, settings):
    assert logged_in.post("/tokens/", {"name": " ", "scope": "ingest"}).status_code == 400
    assert logged_in.post("/tokens/", {"name": "x", "scope": "root"}).status_code == 400
    assert logged_in.post("/tokens/", {"name": "x" * 81, "scope": "ingest"}).status_code == 400
    settings.AGENTLAB_MAX_TOKENS = 2
    for n in range(2):
        assert logged_in.post("/tokens/", {"name": f"t{n}", "scope": "ingest"}).status_code == 200
    third = logged_in.post("/tokens/", {"name": "t3", "scope": "gateway"})
    assert third.status_code == 400 and "At most 2 active tokens" in third.content.decode()
    assert not TOKEN_RE.search(third.content.decode())
    assert AccessToken.objects.filter(user=user).count() == 2
    AccessToken.objects.filter(user=user).first().revoke()  # a revoked one does not count
    assert logged_in.post("/tokens/", {"name": "t3", "scope": "ingest"}).status_code == 200


def test_revoking_on_the_page_ends_the_token(logged_in, user):
    row, secret = create_token(user, "laptop", "ingest")
    response = logged_in.post(f"/tokens/{row.pk}/revoke/")
    assert response.status_code == 302 and response["Location"] == "/tokens/"
    row.refresh_from_db()
    assert row.revoked_at is not None
    assert authenticate(bearer(secret), "ingest") == Refused("revoked")
    assert logged_in.get(f"/tokens/{row.pk}/revoke/").status_code == 405  # POST only
    assert "Revoke</button>" not in logged_in.get("/tokens/").content.decode()


def test_another_user_gets_a_404_on_revoke_and_the_token_stays(user, other_user):
    row, secret = create_token(user, "alice's", "ingest")
    bob = Client()
    bob.force_login(other_user)
    assert bob.post(f"/tokens/{row.pk}/revoke/").status_code == 404
    assert bob.post("/tokens/999999/revoke/").status_code == 404
    row.refresh_from_db()
    assert row.revoked_at is None
    assert isinstance(authenticate(bearer(secret), "ingest"), Authenticated)


def test_revoke_needs_the_csrf_token(user):
    row, _secret = create_token(user, "x", "ingest")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.post(f"/tokens/{row.pk}/revoke/").status_code == 403
    row.refresh_from_db()
    assert row.revoked_at is None


def test_the_header_links_the_page(logged_in):
    assert 'href="/tokens/">Access tokens</a>' in logged_in.get("/").content.decode()


# -- manage.py token --------------------------------------------------------------------------

@pytest.mark.parametrize("form", sorted(HEADER_FORMS))
def test_the_command_prints_a_token_authenticate_accepts(user, form):
    printed = command("create", "alice", "--scope", "ingest", "--name", "ci")
    secret = printed.strip()
    assert printed == secret + "\n" and TOKEN_RE.fullmatch(secret)
    found = authenticate(HEADER_FORMS[form](secret), "ingest")
    assert isinstance(found, Authenticated)
    assert found.user == user and found.token.name == "ci"


def test_the_command_lists_and_revokes(user):
    secret = command("create", "alice", "--scope", "gateway").strip()
    row = AccessToken.objects.get(user=user)
    assert row.name.startswith("manage.py token ")
    listed = command("list", "alice")
    assert f"{row.pk}\t{row.name}\tgateway\t{row.shown}" in listed and "active" in listed
    assert secret not in listed
    command("revoke", str(row.pk))
    assert "revoked" in command("list", "alice")
    assert authenticate(bearer(secret), "gateway") == Refused("revoked")


def test_the_command_refuses_an_unknown_user_scope_or_id(user, settings):
    with pytest.raises(CommandError, match="no user"):
        command("create", "nobody", "--scope", "ingest")
    with pytest.raises(CommandError):
        command("create", "alice", "--scope", "root")
    with pytest.raises(CommandError, match="no token"):
        command("revoke", "424242")
    settings.AGENTLAB_MAX_TOKENS = 1
    command("create", "alice", "--scope", "ingest")
    with pytest.raises(CommandError, match="At most 1"):
        command("create", "alice", "--scope", "ingest")


# -- authenticate -----------------------------------------------------------------------------

def test_wrong_scope_revoked_unknown_and_inactive_are_refused_with_their_reasons(
        user, django_user_model):
    _row, secret = create_token(user, "ingest only", "ingest")
    assert authenticate(bearer(secret), "gateway") == Refused("scope")
    assert Refused("scope").status == 403
    unknown = "al_" + "A" * 43
    assert authenticate(bearer(unknown), "ingest") == Refused("unknown")
    # the right prefix, a wrong rest: still unknown (the hash is what is compared)
    assert authenticate(bearer(secret[:-4] + "AAAA"), "ingest") == Refused("unknown")
    assert Refused("unknown").status == 401
    user.is_active = False
    user.save()
    assert authenticate(bearer(secret), "ingest") == Refused("inactive")
    user.is_active = True
    user.save()
    AccessToken.objects.get(user=user).revoke()
    assert authenticate(bearer(secret), "ingest") == Refused("revoked")
    assert Refused("revoked").message == "This token was revoked."


@pytest.mark.parametrize("headers, reason", [
    ({}, "missing"),
    ({"Authorization": "Bearer "}, "malformed"),
    ({"Authorization": "Token al_abc"}, "malformed"),
    ({"Authorization": "Basic !!!not-base64"}, "malformed"),
    ({"Authorization": "Basic " + base64.b64encode(b"no-colon").decode()}, "malformed"),
    ({"x-api-key": "sk-not-ours"}, "malformed"),
    ({"x-api-key": "al_" + "A" * 300}, "malformed"),
])
def test_credentials_that_are_not_a_token_are_refused(headers, reason):
    assert authenticate(headers, "ingest") == Refused(reason)


def test_authorization_wins_over_x_api_key():
    assert presented({"Authorization": "Bearer al_one", "x-api-key": "al_two"}) == "al_one"


def test_the_hash_not_the_secret_is_stored(user):
    row, secret = create_token(user, "stored", "ingest")
    assert row.digest == digest(secret) and len(row.digest) == 64
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM tokens_accesstoken WHERE id = %s", [row.pk])
        stored = " ".join(str(v) for v in cursor.fetchone())
    assert secret not in stored and secret[3:] not in stored
    assert secret[3:11] in stored  # the prefix the page shows, and no more of it
    assert secret[3:12] not in stored


def test_last_used_is_written_at_most_once_a_minute(user, django_assert_num_queries):
    row, secret = create_token(user, "used", "ingest")
    assert row.last_used_at is None
    authenticate(bearer(secret), "ingest")
    row.refresh_from_db()
    first = row.last_used_at
    assert first is not None and timezone.now() - first < timedelta(seconds=5)
    with django_assert_num_queries(1):  # the lookup only: no write within the minute
        authenticate(bearer(secret), "ingest")
    row.refresh_from_db()
    assert row.last_used_at == first
    AccessToken.objects.filter(pk=row.pk).update(last_used_at=first - TOUCH_EVERY)
    authenticate(bearer(secret), "ingest")
    row.refresh_from_db()
    assert row.last_used_at > first


def test_a_refused_token_is_not_marked_used(user):
    row, secret = create_token(user, "x", "ingest")
    authenticate(bearer(secret), "gateway")
    row.refresh_from_db()
    assert row.last_used_at is None


def test_create_token_checks_name_and_scope(user):
    with pytest.raises(ValidationError):
        create_token(user, "", "ingest")
    with pytest.raises(ValidationError):
        create_token(user, "x" * 81, "ingest")
    with pytest.raises(ValidationError):
        create_token(user, "x", "admin")
    row, _ = create_token(user, "  two   words ", "ingest")
    assert row.name == "two words"
