"""A second account against the first's access tokens: it cannot see them (not their names,
not their prefixes, never a secret), cannot revoke them (404, like a missing one), and a token
it makes is its own. Staff are no exception: tokens are personal."""

from __future__ import annotations

import pytest
from django.test import Client

from agentlab.tokens.auth import Authenticated, authenticate
from agentlab.tokens.models import AccessToken, create_token

pytestmark = pytest.mark.django_db


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("visitor", ["other_user", "staff"])
def test_a_second_account_cannot_see_or_revoke_the_first_accounts_tokens(
        request, user, visitor):
    row, secret = create_token(user, "alice-deploy-token", "ingest")
    intruder = client_for(request.getfixturevalue(visitor))
    page = intruder.get("/tokens/").content.decode()
    assert "alice-deploy-token" not in page and row.prefix not in page and secret not in page
    assert intruder.post(f"/tokens/{row.pk}/revoke/").status_code == 404
    row.refresh_from_db()
    assert row.revoked_at is None
    found = authenticate({"Authorization": f"Bearer {secret}"}, "ingest")
    assert isinstance(found, Authenticated) and found.user == user


def test_a_token_made_on_the_page_is_the_visitors_whatever_the_form_says(user, other_user):
    bob = client_for(other_user)
    bob.post("/tokens/", {"name": "mine", "scope": "ingest", "user": user.pk,
                          "user_id": user.pk})
    assert AccessToken.objects.get(name="mine").user == other_user
    assert not AccessToken.objects.filter(user=user).exists()


def test_an_anonymous_visitor_is_sent_to_log_in_and_nothing_is_made():
    anonymous = Client()
    assert anonymous.get("/tokens/")["Location"].startswith("/login/")
    assert anonymous.post("/tokens/", {"name": "x", "scope": "ingest"}).status_code == 302
    assert not AccessToken.objects.exists()


def test_a_token_is_not_a_session(user):
    """A token authenticates only where a caller asks `authenticate`: the pages ignore it."""
    _row, secret = create_token(user, "ci", "ingest")
    response = Client().get("/tokens/", headers={"Authorization": f"Bearer {secret}"})
    assert response.status_code == 302 and response["Location"].startswith("/login/")
