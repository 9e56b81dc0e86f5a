"""The OTLP receiver against a second account and a hostile sender: another user's trace id
makes a run of one's own and leaves theirs as it was; a revoked token, a session cookie and a
gzip bomb store nothing; a flood from one account waits (429, Retry-After) while another
account's spans go straight in."""

from __future__ import annotations

import gzip

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from django.utils import timezone

from agentlab.receiver import views
from agentlab.receiver.models import ReceivedTrace
from agentlab.receiver.ratelimit import RateLimiter
from agentlab.tokens.models import create_token
from tests.otlp_spans import AgentTrace, encoded
from tests.receiver_client import post_traces
from traces.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


async def post(body: bytes, token: str | None = None, client: AsyncClient | None = None,
               **headers: str):
    if token:
        headers["Authorization"] = f"Bearer {token}"
    cookies = {"sessionid": client.cookies["sessionid"].value} if client else None
    return await post_traces(body, cookies=cookies, **headers)


async def token_of(user, scope: str = "ingest") -> str:
    return (await sync_to_async(create_token)(user, "t", scope))[1]


async def test_another_users_trace_id_adds_nothing_to_their_run(user, other_user):
    agent = AgentTrace()
    agent.start()
    agent.llm_asks_tool()
    await post(encoded(agent.ended), await token_of(user))
    theirs = (await ReceivedTrace.objects.select_related("run").aget(user=user)).run
    before = await theirs.steps.acount()
    # The intruder knows the trace id (and even the span ids) and sends a root that would end it.
    agent.tool()
    agent.llm_answers()
    agent.finish()
    await post(encoded(agent.ended), await token_of(other_user))
    theirs = await Run.objects.aget(pk=theirs.pk)
    assert theirs.status == "running" and await theirs.steps.acount() == before
    mine = (await ReceivedTrace.objects.select_related("run").aget(user=other_user)).run
    assert mine.pk != theirs.pk and mine.user_id == other_user.pk


async def test_a_revoked_token_and_a_session_store_nothing(user):
    row, token = await sync_to_async(create_token)(user, "old", "ingest")
    row.revoked_at = timezone.now()
    await row.asave()
    assert (await post(encoded(AgentTrace().whole()), token)).status_code == 401
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    assert (await post(encoded(AgentTrace().whole()), client=client)).status_code == 401
    assert not await Run.objects.aexists()


async def test_a_gzip_bomb_is_refused_and_stores_nothing(user):
    bomb = gzip.compress(b"\x00" * 100_000_000, compresslevel=9)
    response = await post(bomb, await token_of(user), **{"Content-Encoding": "gzip"})
    assert response.status_code == 413
    assert not await Run.objects.aexists()


async def test_a_flood_from_one_account_waits_while_another_goes_in(user, other_user,
                                                                    monkeypatch):
    monkeypatch.setattr(views, "LIMITER", RateLimiter(spans_per_s=1, burst=5, max_in_flight=4))
    flooder, other = await token_of(user), await token_of(other_user)
    assert (await post(encoded(AgentTrace().whole()), flooder)).status_code == 200
    assert (await post(encoded(AgentTrace().whole()), flooder)).status_code == 200
    refused = await post(encoded(AgentTrace().whole()), flooder)
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert (await post(encoded(AgentTrace().whole()), other)).status_code == 200
    assert await Run.objects.filter(user=other_user).acount() == 1
    assert await Run.objects.filter(user=user).acount() == 2
