"""The gateway (/gateway/…) and /runs/<id>/control against a second account, a staff member
with few rights and a hostile client: every endpoint wants a live token of scope `gateway`
(a revoke or a deactivation counts at once); another account's session key, source run,
conversation or trace id never reaches the first account's run; the run controls follow
traces.access and want the CSRF token; every limit answers in the OpenAI error shape the
client raises, before any work. Guardrails, keys and what upstream learns:
test_gateway_leaks.py."""

from __future__ import annotations

import asyncio
import json

import httpx2 as httpx
import openai
import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient, override_settings

from agentlab.gateway import views
from agentlab.gateway.models import GatewaySession
from agentlab.receiver.ratelimit import RateLimiter
from agentlab.tokens.models import create_token
from tests.fake_openai import Reply
from tests.gateway_clients import (
    APP,
    CALL,
    answer,
    in_process,
    open_session,
    weather_agent,
    written,
)
from tests.waiting import await_until
from traces import access
from traces.models import Run, Step

pytestmark = pytest.mark.django_db(transaction=True)
KEY = "k" * 24  # a session key: unknown, or (renamed) alice's
# Every gateway endpoint, as a client calls it: (method, path, JSON body).
CHAT = {"model": "scripted", "messages": [{"role": "user", "content": "hi"}]}
ENDPOINTS = [
    ("post", "/gateway/v1/chat/completions", CHAT),
    ("get", "/gateway/v1/models", None),
    ("post", "/gateway/v1/embeddings", {"model": "scripted", "input": "hi"}),
    ("post", "/gateway/v1/responses", {"model": "scripted", "input": "hi"}),
    ("post", f"/gateway/s/{KEY}/v1/chat/completions", CHAT),
    ("get", f"/gateway/s/{KEY}/v1/models", None),
    ("post", f"/gateway/s/{KEY}/v1/embeddings", {"model": "scripted", "input": "hi"}),
    ("post", f"/gateway/s/{KEY}/v1/responses", {"model": "scripted", "input": "hi"}),
    ("post", "/gateway/sessions", {"mode": "record"}),
    ("get", f"/gateway/sessions/{KEY}", None),
    ("post", f"/gateway/sessions/{KEY}/end", {"exit_code": 0}),
    ("get", "/gateway/runner/next?wait=0", None),
]


def http() -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=APP),
                             base_url="http://testserver")


async def call(method: str, path: str, body=None, token: str | None = None, **headers: str
               ) -> httpx.Response:
    if token:
        headers["Authorization"] = f"Bearer {token}"
    async with http() as client:
        if method == "get":
            return await client.get(path, headers=headers)
        return await client.post(path, json=body, headers=headers)


async def token_of(user, scope: str = "gateway") -> str:
    return (await sync_to_async(create_token)(user, "agent", scope))[1]


def error_of(response: httpx.Response) -> dict:
    """The OpenAI error object every refusal carries."""
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


def session_client(token: str, key: str) -> openai.AsyncOpenAI:
    return in_process(token, f"/gateway/s/{key}/v1")


async def run_of(user) -> Run:
    return await await_until(lambda: Run.objects.filter(user=user).afirst(), timeout=10)


async def held_run(user) -> Run:
    async def paused():
        return await Run.objects.filter(user=user, status="paused").afirst()

    return await await_until(paused, timeout=10)


async def steps(run_id: int) -> list[tuple[int, str, str]]:
    return [(s.seq, s.kind, s.status) async for s in Step.objects.filter(run_id=run_id)
            .order_by("seq")]


# -- tokens ------------------------------------------------------------------------------------

@pytest.mark.parametrize("method,path,body", ENDPOINTS, ids=[f"{m} {p}" for m, p, _ in ENDPOINTS])
async def test_every_endpoint_wants_a_live_gateway_token(method, path, body, user, profile):
    ingest = await token_of(user, "ingest")
    row, revoked = await sync_to_async(create_token)(user, "old", "gateway")
    await sync_to_async(row.revoke)()
    client = AsyncClient()  # a logged-in browser's cookie is no token either
    await client.aforce_login(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    for token, headers, status, code in [
            (None, {}, 401, "missing"), (None, {"Cookie": cookie}, 401, "missing"),
            ("al_" + "x" * 43, {}, 401, "unknown"), ("sk-not-ours", {}, 401, "malformed"),
            (ingest, {}, 403, "scope"), (revoked, {}, 401, "revoked")]:
        response = await call(method, path, body, token, **headers)
        assert response.status_code == status, (token, headers, response.text)
        error = error_of(response)
        assert error["code"] == code and response.headers["x-should-retry"] == "false"
        assert error["type"] == ("permission_error" if status == 403 else "authentication_error")
    assert not await Run.objects.aexists() and not await GatewaySession.objects.aexists()


async def test_a_revoke_or_a_deactivation_counts_at_once_despite_the_cache(user, profile):
    row, token = await sync_to_async(create_token)(user, "agent", "gateway")
    page = AsyncClient()  # revoked from the Access tokens page, as its owner does
    await page.aforce_login(user)  # (before: a login saves the user, which empties the cache)
    assert (await call("get", "/gateway/v1/models", token=token)).status_code == 200  # cached
    assert (await page.post(f"/tokens/{row.pk}/revoke/")).status_code == 302
    refused = await call("get", "/gateway/v1/models", token=token)
    assert refused.status_code == 401 and error_of(refused)["code"] == "revoked"
    token = await token_of(user)
    assert (await call("get", "/gateway/v1/models", token=token)).status_code == 200
    user.is_active = False  # as the admin deactivates an account
    await user.asave()
    refused = await call("post", "/gateway/v1/chat/completions", CHAT, token)
    assert refused.status_code == 401 and error_of(refused)["code"] == "inactive"
    assert not await Run.objects.aexists()


# -- a second account --------------------------------------------------------------------------

async def test_another_accounts_session_key_reads_as_unknown_and_adds_nothing(
        user, other_user, staff, profile, fake_llm, ended):
    alice = await token_of(user)
    fake_llm.script(CALL, answer("sunny"))
    key = (await open_session(alice, name="weather.py"))["session"]
    await weather_agent(session_client(alice, key), "sunny")
    theirs = await run_of(user)
    await written()  # a reply's step is written after the reply
    before = await steps(theirs.pk)
    fake_llm.script(answer("mine now"))
    for intruder in (other_user, staff):  # a session is its owner's alone, staff included
        token = await token_of(intruder)
        for method, path, body in ENDPOINTS:
            if KEY not in path:
                continue
            response = await call(method, path.replace(KEY, key), body, token)
            assert response.status_code == 404, (path, response.text)
            assert error_of(response)["code"] == "session_not_found"
            unknown = await call(method, path, body, token)  # a key nobody has: the same
            assert (unknown.status_code, error_of(unknown)) == (404, error_of(response))
        with pytest.raises(openai.NotFoundError):
            await weather_agent(session_client(token, key))
    assert await steps(theirs.pk) == before and len(fake_llm.requests) == 2
    row = await GatewaySession.objects.aget(key=key)
    assert row.ended_at is None and (await Run.objects.aget(pk=theirs.pk)).status == "running"
    assert not await Run.objects.exclude(user=user).aexists()


@pytest.mark.parametrize("mode,extra", [("replay", {}),
                                        ("fork", {"fork_seq": 2, "edit": {"observation": "x"}})])
async def test_another_accounts_run_as_source_is_a_404_like_no_run(mode, extra, user,
                                                                   other_user, profile,
                                                                   fake_llm, ended):
    alice, bob = await token_of(user), await token_of(other_user)
    fake_llm.script(CALL, answer("sunny"))
    await weather_agent(in_process(alice), "sunny")
    theirs = (await run_of(user)).pk
    answers = []
    for source in (theirs, 10**6, 10**30, str(theirs)):
        response = await call("post", "/gateway/sessions", {"mode": mode, "source": source,
                                                            **extra}, bob)
        assert response.status_code == 404, response.text
        error = error_of(response)
        assert error["param"] == "source"
        answers.append(error["message"].replace(str(source), "N"))
    assert len(set(answers)) == 1  # nothing tells their run from none
    assert not await GatewaySession.objects.filter(user=other_user).aexists()


async def test_the_same_conversation_or_trace_from_another_account_is_a_run_of_its_own(
        user, other_user, profile, fake_llm, ended):
    alice, bob = await token_of(user), await token_of(other_user)
    trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    fake_llm.script(CALL, answer("sunny"), answer("traced"))
    said, messages = await weather_agent(in_process(alice), "sunny")
    await in_process(alice).chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": "plan"}],
        extra_headers={"traceparent": trace})
    theirs = [r.pk async for r in Run.objects.filter(user=user).order_by("pk")]
    await written()
    before = {pk: await steps(pk) for pk in theirs}
    # Bob replays alice's conversation word for word, her tool call ids included: it
    # continues her turn keys, so it would land in her run were the index not per account.
    fake_llm.script(answer("bob's"), answer("bob's traced"))
    mine = in_process(bob)
    await mine.chat.completions.create(model="scripted", messages=messages[:4])
    await mine.chat.completions.create(model="scripted", messages=messages,
                                       extra_headers={"traceparent": trace})
    assert {pk: await steps(pk) for pk in theirs} == before
    bobs = [r async for r in Run.objects.filter(user=other_user)]
    assert len(bobs) == 2 and not {r.pk for r in bobs} & set(theirs)
    # His requests carried her call id: no tool step of hers is recorded in his run either.
    assert not await Step.objects.filter(run__user=other_user, kind="tool").aexists()


# -- /runs/<id>/control ------------------------------------------------------------------------

async def control(client: AsyncClient, run_id: int, **frame):
    return await client.post(f"/runs/{run_id}/control", frame, content_type="application/json")


async def logged_in(user, **options) -> AsyncClient:
    client = AsyncClient(**options)
    if user is not None:
        await client.aforce_login(user)
    return client


@pytest.fixture
async def held(user, profile, fake_llm, ended):
    """Alice's agent held at its first call (step mode): (the run, the agent's task)."""
    token = await token_of(user)
    fake_llm.script(answer("sunny"))
    key = (await open_session(token, debug={"step_mode": True}))["session"]
    agent = asyncio.ensure_future(session_client(token, key).chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": "weather?"}]))
    run = await held_run(user)
    yield run, agent
    if not agent.done():
        agent.cancel()
        await asyncio.gather(agent, return_exceptions=True)


async def test_anonymous_and_another_account_reach_no_run_control(held, other_user):
    run, agent = held
    for client, expect in [(await logged_in(None), 302), (await logged_in(other_user), 404)]:
        assert (await client.get(f"/runs/{run.pk}/control")).status_code == expect
        for frame in ({"action": "cancel"}, {"action": "step"}, {"action": "resume"},
                      {"action": "edit", "seq": 1, "input": {"response": {"text": "pwned"}}},
                      {"action": "debug", "step_mode": False}):
            response = await control(client, run.pk, **frame)
            assert response.status_code == expect, (frame, response.content)
            if expect == 302:
                assert response["Location"].startswith("/login/")
    await asyncio.sleep(0.05)
    assert not agent.done() and (await Run.objects.aget(pk=run.pk)).status == "paused"


@pytest.mark.parametrize("role", ["staff", "inactive staff", "inactive owner"])
async def test_staff_reach_run_controls_as_the_rules_say(role, held, user, django_user_model):
    run, agent = held
    if role == "inactive owner":
        visitor = user
    else:  # staff with no Django permission at all: what traces.access says, nothing more
        visitor = await django_user_model.objects.acreate(username="clerk", is_staff=True)
    client = await logged_in(visitor)
    if role.startswith("inactive"):
        visitor.is_active = False
        await visitor.asave()
    watch = access.allowed(visitor, "watch", run)
    assert (await client.get(f"/runs/{run.pk}/control")).status_code in (
        (200,) if watch else (302, 404))
    allowed = access.allowed(visitor, "control", run)
    response = await control(client, run.pk, action="cancel")
    assert response.status_code in ((200,) if allowed else (302, 404)), response.content
    if allowed:
        with pytest.raises(openai.ConflictError, match="cancelled"):
            await asyncio.wait_for(agent, 10)
    else:
        assert not agent.done()


async def test_a_control_post_without_the_csrf_token_is_refused(held, user):
    run, agent = held
    browser = await logged_in(user, enforce_csrf_checks=True)
    for frame in ({"action": "cancel"}, {"action": "resume"}):
        assert (await control(browser, run.pk, **frame)).status_code == 403
    assert (await browser.get(f"/runs/{run.pk}/control")).json()["status"] == "paused"
    assert not agent.done()


async def test_cancel_answers_the_held_agent_with_an_error_it_raises(held, user, fake_llm):
    run, agent = held
    assert (await control(await logged_in(user), run.pk, action="cancel")).status_code == 200
    with pytest.raises(openai.ConflictError) as raised:
        await asyncio.wait_for(agent, 10)
    assert "cancelled" in raised.value.message and raised.value.code == "run_cancelled"
    assert not fake_llm.requests
    run = await await_until(lambda: Run.objects.filter(pk=run.pk, status="cancelled").afirst())
    assert all(status != "running" for _seq, _kind, status in await steps(run.pk))


# -- limits: before any work, in the shape the client raises -----------------------------------

async def test_a_body_over_the_limit_is_a_413_before_django_reads_it(user, profile, fake_llm,
                                                                     monkeypatch):
    read = []
    monkeypatch.setattr(views, "read_json", lambda request: read.append(1))  # never reached
    token = await token_of(user)
    big = {**CHAT, "messages": [{"role": "user", "content": "x" * 5_000}]}
    with override_settings(AGENTLAB_GATEWAY_MAX_BODY_BYTES=4_000):
        for path in ("/gateway/v1/chat/completions", "/gateway/sessions"):
            response = await call("post", path, big, token)
            assert response.status_code == 413 and not read
            error = error_of(response)
            assert error["code"] == "request_too_large" and "4,000 bytes" in error["message"]
            assert "AGENTLAB_GATEWAY_MAX_BODY_BYTES" in error["message"]
            assert response.headers["x-should-retry"] == "false"
        with pytest.raises(openai.APIStatusError) as raised:  # as the SDK reports it
            await in_process(token).chat.completions.create(**big)
    assert raised.value.status_code == 413 and "4,000 bytes" in raised.value.message
    assert not fake_llm.requests and not await Run.objects.aexists()


def test_a_body_over_the_limit_is_a_413_from_daphne_too(live_url, user):
    token = create_token(user, "agent", "gateway")[1]
    limit = 8 * 1024 * 1024  # daphne's (the default: its environment sets none)
    body = b'{"model": "scripted", "messages": [' + b" " * limit + b"]}"
    response = httpx.post(f"{live_url}/gateway/v1/chat/completions", content=body, timeout=30,
                          headers={"Authorization": f"Bearer {token}",
                                   "Content-Type": "application/json"})
    assert response.status_code == 413 and error_of(response)["code"] == "request_too_large"
    assert not Run.objects.exists()


async def test_too_many_requests_a_minute_wait_with_retry_after_while_others_go_on(
        user, other_user, profile, fake_llm, monkeypatch, ended):
    monkeypatch.setattr(views, "LIMITER", RateLimiter(spans_per_s=2 / 60, burst=2,
                                                      max_in_flight=64))
    flooder, other = await token_of(user), await token_of(other_user)
    for _ in range(2):
        assert (await call("get", "/gateway/v1/models", token=flooder)).status_code == 200
    another = await token_of(user)  # per account, not per token: a new token is no way out
    refused = await call("post", "/gateway/v1/chat/completions", CHAT, another)
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert error_of(refused)["code"] == "rate_limited"
    assert "AGENTLAB_GATEWAY_REQUESTS_PER_MIN" in error_of(refused)["message"]
    with pytest.raises(openai.RateLimitError):
        await in_process(flooder).chat.completions.create(**CHAT)
    fake_llm.script(answer("fine"))
    assert (await call("post", "/gateway/v1/chat/completions", CHAT, other)).status_code == 200
    assert not await Run.objects.filter(user=user).aexists()


async def streamed(token: str, body: dict) -> tuple[asyncio.Task, asyncio.Queue]:
    """A streamed chat call straight into the ASGI application (httpx's transport would hand
    over the body only once the app has finished): the app's task and what it sends."""
    raw = json.dumps(body).encode()
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": "/gateway/v1/chat/completions",
             "raw_path": b"/gateway/v1/chat/completions", "query_string": b"",
             "root_path": "", "server": ("testserver", 80), "client": ("127.0.0.1", 5000),
             "headers": [(b"host", b"testserver"), (b"content-type", b"application/json"),
                         (b"content-length", str(len(raw)).encode()),
                         (b"authorization", f"Bearer {token}".encode())]}
    sent: asyncio.Queue = asyncio.Queue()
    messages = [{"type": "http.request", "body": raw, "more_body": False}]

    async def receive():
        if messages:
            return messages.pop()
        await asyncio.Event().wait()  # the client stays until the app is done

    return asyncio.ensure_future(APP(scope, receive, sent.put)), sent


async def test_requests_in_flight_count_until_a_stream_ends(user, profile, fake_llm,
                                                            monkeypatch, ended):
    monkeypatch.setattr(views, "LIMITER", RateLimiter(spans_per_s=0, burst=1, max_in_flight=1))
    token = await token_of(user)
    said = "a slow streamed answer, chunk by chunk"
    fake_llm.script(Reply(text=said, chunk_delay_s=0.1))
    app, sent = await streamed(token, {**CHAT, "stream": True})
    assert (await asyncio.wait_for(sent.get(), 10))["status"] == 200
    assert b"assistant" in (await asyncio.wait_for(sent.get(), 10))["body"]  # it has begun
    refused = await call("post", "/gateway/v1/chat/completions", CHAT, token)
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"
    assert "AGENTLAB_GATEWAY_MAX_IN_FLIGHT" in error_of(refused)["message"]
    await asyncio.wait_for(app, 20)
    body = b"".join(m.get("body", b"") for m in [sent.get_nowait() for _ in range(sent.qsize())])
    assert body.endswith(b"data: [DONE]\n\n")
    fake_llm.script(answer("after"))  # its place is free again once the stream ended
    assert (await call("post", "/gateway/v1/chat/completions", CHAT, token)).status_code == 200


async def test_holds_past_the_limit_are_refused_not_queued(user, other_user, profile,
                                                           fake_llm, ended):
    alice = await token_of(user)
    agents = []
    with override_settings(AGENTLAB_GATEWAY_MAX_HELD=1):
        for _ in range(2):
            key = (await open_session(alice, debug={"step_mode": True}))["session"]
            agents.append(session_client(alice, key))
        first = asyncio.ensure_future(agents[0].chat.completions.create(**CHAT))
        run = await held_run(user)
        with pytest.raises(openai.RateLimitError) as raised:
            await agents[1].chat.completions.create(**CHAT)
        assert raised.value.code == "too_many_held"
        assert "AGENTLAB_GATEWAY_MAX_HELD" in raised.value.message
        assert raised.value.response.headers["x-should-retry"] == "false"
        fake_llm.script(answer("held, then sent"))
        assert (await control(await logged_in(user), run.pk, action="resume")).status_code == 200
        reply = await asyncio.wait_for(first, 10)
    assert reply.choices[0].message.content == "In Paris it is held, then sent."
    assert len(fake_llm.requests) == 1


async def test_runs_past_the_active_limit_are_refused_by_name(user, profile, fake_llm, ended):
    token = await token_of(user)
    fake_llm.script(answer("one"))
    client = in_process(token)
    with override_settings(AGENTLAB_MAX_ACTIVE_RUNS=1):
        await client.chat.completions.create(**CHAT)  # its run goes on (no reply ends it)
        with pytest.raises(openai.RateLimitError) as raised:
            await client.chat.completions.create(
                model="scripted", messages=[{"role": "user", "content": "another agent"}])
    assert raised.value.code == "too_many_runs"
    assert raised.value.response.headers["x-should-retry"] == "false"
    assert "1" in raised.value.message
    assert await Run.objects.acount() == 1 and len(fake_llm.requests) == 1


BAD_CHATS = [  # (body, the field the answer names)
    (b"{not json", None),
    (b"[" * 100_000, None),
    ([CHAT], None),
    ({**CHAT, "model": 3}, "model"),
    ({**CHAT, "model": "m" * 5_000}, "model"),
    ({**CHAT, "messages": "hi"}, "messages"),
    ({**CHAT, "messages": []}, "messages"),
    ({**CHAT, "messages": [{"role": "robot", "content": "hi"}]}, "messages[0]"),
    ({**CHAT, "temperature": "hot"}, "temperature"),
    ({**CHAT, "temperature": True}, "temperature"),
    ({**CHAT, "max_tokens": 0}, "max_tokens"),
    ({**CHAT, "max_tokens": "10"}, "max_tokens"),
    ({**CHAT, "tools": "calculator"}, "tools"),
    ({**CHAT, "stop": 5}, "stop"),
    ({**CHAT, "response_format": "json"}, "response_format"),
    ({**CHAT, "n": 2}, "n"),
    ({**CHAT, "frobnicate": True}, "frobnicate"),
]


@pytest.mark.parametrize("body,param", BAD_CHATS, ids=[str(p) for _b, p in BAD_CHATS])
async def test_a_malformed_chat_request_is_a_400_naming_the_field(body, param, user, profile,
                                                                  fake_llm):
    token = await token_of(user)
    async with http() as client:
        response = await client.post(
            "/gateway/v1/chat/completions", headers={"Authorization": f"Bearer {token}"},
            **({"content": body} if isinstance(body, bytes) else {"json": body}))
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert error["param"] == param and error["type"] == "invalid_request_error"
    if param:
        assert param.split("[")[0] in error["message"]
    assert not fake_llm.requests and not await Run.objects.aexists()


BAD_LAUNCHES = [  # (method, path, body, the field the answer names)
    ("post", "/gateway/sessions", ["record"], None),
    ("post", "/gateway/sessions", {"mode": "attack"}, "mode"),
    ("post", "/gateway/sessions", {"on_divergence": "explode"}, "on_divergence"),
    ("post", "/gateway/sessions", {"debug": "all"}, "debug"),
    ("post", "/gateway/sessions", {"debug": {"step_mode": "yes"}}, "debug"),
    ("post", "/gateway/sessions", {"debug": {"break_kinds": [["llm"]]}}, "debug"),
    ("post", "/gateway/sessions", {"debug": {"break_tools": [{"x": 1}]}}, "debug"),
    ("post", "/gateway/sessions", {"mode": "fork", "source": "{run}", "fork_seq": 0}, "fork_seq"),
    ("post", "/gateway/sessions", {"mode": "fork", "source": "{run}", "fork_seq": 10**30},
     "fork_seq"),
    ("post", "/gateway/sessions", {"mode": "fork", "source": "{run}", "fork_seq": 1,
                                   "edit": ["x"]}, "edit"),
    ("post", "/gateway/sessions/{key}/end", {"exit_code": "0"}, "exit_code"),
    ("post", "/gateway/sessions/{key}/end", {"exit_code": 10**30}, "exit_code"),
    ("get", "/gateway/runner/next?wait=soon", None, "wait"),
    ("get", "/gateway/v1/chat/completions", None, None),
]


@pytest.mark.parametrize("method,path,body,param", BAD_LAUNCHES,
                         ids=[f"{m} {p} {b}"[:60] for m, p, b, _ in BAD_LAUNCHES])
async def test_a_malformed_launcher_request_is_refused_naming_the_field(
        method, path, body, param, user, profile):
    token = await token_of(user)
    run = await sync_to_async(Run.objects.create)(user=user, agent_name="x", status="failed")
    key = (await open_session(token))["session"]
    if isinstance(body, dict):
        body = {k: v.format(run=run.pk) if isinstance(v, str) and "{" in v else v
                for k, v in body.items()}
        body = {k: int(v) if k == "source" else v for k, v in body.items()}
    response = await call(method, path.format(key=key), body, token)
    assert response.status_code == (405 if method == "get" and param is None else 400), \
        response.text
    assert error_of(response)["param"] == param
    assert await GatewaySession.objects.acount() == 1
    assert (await GatewaySession.objects.aget()).ended_at is None


async def test_a_hold_past_the_clients_patience_is_a_504_it_does_not_retry(user, profile,
                                                                            fake_llm, ended):
    token = await token_of(user)
    with override_settings(AGENTLAB_GATEWAY_HOLD_S=0.2):
        key = (await open_session(token, debug={"step_mode": True}))["session"]
        client = in_process(token, f"/gateway/s/{key}/v1").with_options(max_retries=2)
        with pytest.raises(openai.InternalServerError) as raised:
            await client.chat.completions.create(**CHAT)
    assert raised.value.status_code == 504 and raised.value.code == "held_too_long"
    assert raised.value.response.headers["x-should-retry"] == "false"
    assert "AGENTLAB_GATEWAY_HOLD_S" in raised.value.message
    assert not fake_llm.requests  # nothing reached the model, and the SDK asked once
    run = await run_of(user)
    await written()  # the held step's row goes after the 504
    assert [(kind, status) for _seq, kind, status in await steps(run.pk)] == [("llm", "error")]


async def test_sessions_open_at_once_are_counted_per_account_before_one_is_made(
        user, other_user, settings):
    from agentlab.gateway.models import GatewaySession

    settings.AGENTLAB_GATEWAY_MAX_SESSIONS = 2
    alice, bob = await token_of(user), await token_of(other_user)
    for _ in range(2):
        assert (await call("post", "/gateway/sessions", {"name": "a.py"}, alice)).status_code == 201
    refused = await call("post", "/gateway/sessions", {"name": "a.py"}, alice)
    assert refused.status_code == 429
    assert error_of(refused)["code"] == "too_many_sessions"
    assert "AGENTLAB_GATEWAY_MAX_SESSIONS" in error_of(refused)["message"]
    assert await GatewaySession.objects.filter(user=user).acount() == 2  # nothing made
    # Another account's sessions are its own to count.
    assert (await call("post", "/gateway/sessions", {"name": "b.py"}, bob)).status_code == 201
    # An ended session makes room again.
    first = await GatewaySession.objects.filter(user=user).afirst()
    assert (await call("post", f"/gateway/sessions/{first.key}/end", {"exit_code": 0},
                       alice)).status_code == 200
    assert (await call("post", "/gateway/sessions", {"name": "a.py"}, alice)).status_code == 201
