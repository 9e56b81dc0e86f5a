"""Who gets what, for every URL and both sockets: anonymous, another user, staff and the owner.

The URL list is walked from the resolver (and the socket list from agentlab.routing), so a new
URL or socket without a row here fails `test_every_url_and_socket_has_a_row`. Each row says what
each visitor gets: `login` (sent to log in), `404` (another user's row: not disclosed),
`ok` (let through: a page, a redirect after the action, or the form again), `hidden` (a list
page that answers but shows none of alice's rows), `admin` (sent to the admin's login),
`accepted` / `refused` for sockets (refused: an error frame, then close 4403).

Runs that an action would launch are recorded instead of run (`execution.launch`,
`run_engine.submit`, `runner.start_experiment`): this file is about who may act, the other tests
about what runs."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from agentlab.asgi import application
from agentlab.chat.models import ChatTurn, Conversation
from agentlab.compare.models import Comparison, ComparisonEntry
from agentlab.evals import runner
from agentlab.evals.models import Case, PlaygroundCase, Suite
from agentlab.feedback.models import Feedback
from agentlab.gateway.models import GatewaySession
from agentlab.monitors.models import Alert, LiveScore, LiveScorer
from agentlab.review.models import Rule
from agentlab.routing import websocket_urlpatterns
from agentlab.runs import engine as run_engine
from agentlab.runs import execution
from agentlab.runs.snapshot import create_run
from agentlab.tokens.models import create_token
from tests.factories import make_agents, make_queue, scripted_profile
from tests.sockets import headers
from traces import access
from traces.models import Run, Step

# Pages run in the test's transaction; sockets read from another thread, so they need commits.
pages_db = pytest.mark.django_db
sockets_db = pytest.mark.django_db(transaction=True)

SECRET = "alice-secret-question"
ROLES = ("anonymous", "other", "staff", "owner")


@dataclass(frozen=True)
class Row:
    """How one URL is visited, and what each role gets."""

    path: str  # formatted with the world's ids: {run}, {llm}, {comparison}, …
    method: str = "get"
    data: dict[str, Any] | None = None
    anonymous: str = "login"
    other: str = "404"
    staff: str = "ok"
    owner: str = "ok"

    def expected(self) -> dict[str, str]:
        return {role: getattr(self, role) for role in ROLES}


def lists(path: str, *, staff: str = "ok") -> Row:
    """A page of the visitor's own rows (staff: everyone's): `ok` is with alice's, `hidden`
    without."""
    return Row(path, other="hidden", staff=staff)


def own(path: str, method: str = "post", data: dict[str, Any] | None = None) -> Row:
    """Something any logged-in user may do for themselves."""
    return Row(path, method, data, other="ok")


PERSONAL = {"staff": "404"}  # conversations are their owner's alone, staff included

MATRIX: dict[str, Row] = {
    "home": lists("/"),
    "healthz": Row("/healthz", anonymous="ok", other="ok"),
    "login": Row("/login/", anonymous="ok", other="ok"),
    "logout": Row("/logout/", "post", other="login", staff="login", owner="login"),
    "admin": Row("/admin/", anonymous="admin", other="admin", owner="admin"),
    # traces
    "runs": lists("/runs/"),
    "run_import": own("/runs/import/"),
    "run_diff": Row("/runs/diff/?a={run}&b={second}"),
    "run": Row("/runs/{run}/"),
    "run_steps": Row("/runs/{run}/steps/?after=0"),
    "run_find": Row("/runs/{run}/find/?q=Paris"),
    "run_timeline": Row("/runs/{run}/timeline/"),
    "run_graph": Row("/runs/{run}/graph/?step=1&node=agent:agent"),
    "run_graph_step": Row("/runs/{run}/graph/step/1/"),
    "run_graphs": Row("/runs/graphs/?a={run}&b={second}"),
    "step_payload": Row("/runs/{run}/steps/1/payload/input/"),
    "step_messages": Row("/runs/{run}/steps/1/messages/"),
    "run_export": Row("/runs/{run}/export/"),
    # the run socket's controls over HTTP: the same rules (control frames:
    # tests/security/test_gateway_hostile.py)
    "run_control": Row("/runs/{run}/control"),
    "run_export_otlp": Row("/runs/{run}/export/otlp/"),
    "run_export_otlp_protobuf": Row("/runs/{run}/export/otlp.pb"),
    "otel_status": Row("/runs/otel/", owner="404"),  # staff only
    # forks (anyone who may watch may fork; the new run is theirs)
    "run_replay": Row("/runs/{run}/replay/", "post", {"tools": "recorded"}),
    "run_fork": Row("/runs/{run}/fork/1/"),
    "run_resume": Row("/runs/{run}/resume/", "post"),
    # a replay or fork asked from a gateway run's page for the asker's runner: theirs alone
    "gateway_job": Row("/gateway/jobs/{job}/", **PERSONAL),
    "step_playground": Row("/runs/{run}/steps/1/playground/"),
    # chat
    "chat": lists("/chat/", staff="hidden"),
    "chat_new": own("/chat/new/", data={"agent": "{agent}"}),
    "chat_run": own("/chat/run/", data={"agent": "{agent}", "question": "What is 6*7?"}),
    "live_run": Row("/chat/runs/{run}/"),
    "chat_conversation": Row("/chat/{conversation}/", **PERSONAL),
    "chat_rename": Row("/chat/{conversation}/rename/", "post", {"title": "x"}, **PERSONAL),
    "chat_delete": Row("/chat/{conversation}/delete/", "post", **PERSONAL),
    # compare
    "compare:index": lists("/compare/"),
    "compare:detail": Row("/compare/{comparison}/"),
    "compare:summary": Row("/compare/{comparison}/summary/"),
    "compare:rerun": Row("/compare/{comparison}/rerun/", "post"),
    # dashboard and evaluation
    "dashboard:index": Row("/dashboard/", other="ok"),  # figures only, of the visitor's runs
    "evals:index": lists("/evals/"),
    # a shared suite (no owner) is configuration (like agents): every logged-in user may read
    # its cases; one made from runs is its owner's (tests/security/test_cases_from_runs.py)
    "evals:suite": Row("/evals/suites/{suite}/", other="ok"),
    # cases from runs: only runs the visitor may see, into a suite they may edit (a new one)
    "evals:add_runs": Row("/evals/cases/from-runs/", "post", {
        "run": "{run}", "suite": "new", "new_suite": "From runs", "expected-{run}": "42"}),
    "evals:playground_case_save": Row("/evals/playground-cases/from/{run}/1/", "post", {
        "messages": '[{{"role": "user", "content": "hi"}}]', "params": "{{}}", "case_name": "x"}),
    # playground cases are their owner's alone (alice's is named SECRET)
    "evals:playground_cases": lists("/evals/playground-cases/", staff="hidden"),
    "evals:playground_case": Row("/evals/playground-cases/{pcase}/", **PERSONAL),
    "evals:playground_case_delete": Row("/evals/playground-cases/{pcase}/delete/", "post",
                                        **PERSONAL),
    "evals:experiment": Row("/evals/experiments/{experiment}/"),
    "evals:live": Row("/evals/experiments/{experiment}/live/"),
    "evals:cancel": Row("/evals/experiments/{experiment}/cancel/", "post"),
    "evals:rerun": Row("/evals/experiments/{experiment}/rerun/", "post"),
    "evals:compare_pick": Row("/evals/experiments/{experiment}/compare/?other={earlier}"),
    "evals:compare": Row("/evals/experiments/{experiment}/compare/{earlier}/"),
    # access tokens: each user's own, staff included (alice's token is named SECRET)
    "tokens:index": lists("/tokens/", staff="hidden"),
    "tokens:revoke": Row("/tokens/{token}/revoke/", "post", **PERSONAL),
    # The OTLP receiver takes a token, never a session: a logged-in visitor is refused too.
    "receive_traces": Row("/v1/traces", "post", anonymous="401", other="401", staff="401",
                          owner="401"),
    # The gateway takes a token of scope gateway, never a session (tokens, other accounts'
    # sessions and runs: tests/security/test_gateway_hostile.py).
    **{name: Row(path, method, anonymous="401", other="401", staff="401", owner="401")
       for name, method, path in [
           ("gateway_chat", "post", "/gateway/v1/chat/completions"),
           ("gateway_models", "get", "/gateway/v1/models"),
           ("gateway_embeddings", "post", "/gateway/v1/embeddings"),
           ("gateway_responses", "post", "/gateway/v1/responses"),
           ("gateway_open_session", "post", "/gateway/sessions"),
           ("gateway_session", "get", "/gateway/sessions/some-key"),
           ("gateway_end_session", "post", "/gateway/sessions/some-key/end"),
           ("gateway_runner_next", "get", "/gateway/runner/next?wait=0")]},
    # feedback: given by whoever may see the run; a row changed only by its author (alice's)
    "feedback:strip": Row("/feedback/runs/{run}/1/"),
    "feedback:form": Row("/feedback/runs/{run}/1/give/", "post", {"note": "x"}),
    "feedback:thumbs": Row("/feedback/runs/{run}/0/thumbs/", "post", {"value": "up"}),
    "feedback:edit": Row("/feedback/{feedback}/edit/", "post", {"note": "y"}, **PERSONAL),
    "feedback:delete": Row("/feedback/{feedback}/delete/", "post", **PERSONAL),
    # review queues: root's queue (named SECRET), alice its reviewer; made, changed and
    # filled by staff only; its pages and items reached by its reviewers and staff
    "review:index": lists("/review/"),
    "review:new": Row("/review/new/", "post", {"name": ""}, owner="404"),
    "review:fill": Row("/review/fill/", "post", {"queue": "{queue}", "query": "status=failed"},
                       owner="404"),
    "review:send_pair": Row("/review/pair/?a={run}&b={second}", owner="404"),
    "review:queue": Row("/review/{queue}/"),
    "review:edit": Row("/review/{queue}/edit/", "post", {"name": ""}, owner="404"),
    "review:rule_add": Row("/review/{queue}/rules/", "post", {"which": "failed",
                                                              "percent": "10"}, owner="404"),
    "review:rule_delete": Row("/review/{queue}/rules/{rule}/delete/", "post", owner="404"),
    "review:work": Row("/review/{queue}/work/"),
    "review:item": Row("/review/{queue}/items/{item}/"),
    "review:answer": Row("/review/{queue}/items/{item}/answer/", "post", {"thumbs": "up"}),
    "review:skip": Row("/review/{queue}/items/{item}/skip/", "post"),
    "review:step_payload": Row("/review/runs/{run}/steps/1/payload/input/"),
    "review:step_messages": Row("/review/runs/{run}/steps/1/messages/"),
    # live scorers: configured by staff in the admin; their pages are read-only, any user may
    # open them, figures and rows over the runs the visitor may see
    # (tests/security/test_live_scorer_access.py); an alert (its scorer is named SECRET) is
    # shown to staff and to the one user whose runs made it
    "monitors:index": Row("/scorers/", other="ok"),
    "monitors:scorer": Row("/scorers/{scorer}/", other="ok"),
    "monitors:alerts": lists("/scorers/alerts/"),
    "monitors:banner": lists("/scorers/alerts/banner/"),
}
SOCKETS: dict[str, Row] = {
    "ws/runs/<int:run_id>/": Row("/ws/runs/{run}/", anonymous="refused", other="refused",
                                 staff="accepted", owner="accepted"),
    "ws/chat/<int:conversation_id>/": Row("/ws/chat/{conversation}/", anonymous="refused",
                                          other="refused", staff="refused", owner="accepted"),
}


# -- the rules themselves (pure: no database) --------------------------------------------------

def person(pk: int | None, *, staff: bool = False, active: bool = True) -> SimpleNamespace:
    return SimpleNamespace(pk=pk, is_authenticated=pk is not None, is_active=active,
                           is_staff=staff)


RULE_TABLE = {  # action -> (owner, staff, other, anonymous, the owner deactivated)
    "watch": (True, True, False, False, False),
    "control": (True, True, False, False, False),
    "approve": (True, True, False, False, False),
    "fork": (True, True, False, False, False),
    "converse": (True, False, False, False, False),
}


@pytest.mark.parametrize("action", sorted(RULE_TABLE))
def test_the_rules(action):
    row = SimpleNamespace(user_id=1)
    visitors = (person(1), person(9, staff=True), person(2), person(None), person(1, active=False))
    assert tuple(access.allowed(v, action, row) for v in visitors) == RULE_TABLE[action]
    assert set(RULE_TABLE) == set(access.RULES)
    assert not access.allowed(person(1), action, None)  # no such row
    assert access.RULES["fork"] == access.RULES["watch"]  # whoever may watch may fork


def url_names(patterns: list[Any], namespace: str = "") -> set[str]:
    """Every named URL (the admin as one row: it guards itself, for staff only)."""
    names: set[str] = set()
    for p in patterns:
        if isinstance(p, URLResolver):
            if p.namespace == "admin":
                names.add("admin")
            else:
                names |= url_names(p.url_patterns, p.namespace or namespace)
        elif isinstance(p, URLPattern):
            names.add(f"{namespace}:{p.name}" if namespace else str(p.name))
    return names


@pages_db
def test_every_url_and_socket_has_a_row():
    assert url_names(get_resolver().url_patterns) == set(MATRIX)
    assert {str(p.pattern) for p in websocket_urlpatterns} == set(SOCKETS)


# -- the world: alice's rows, and who visits them ----------------------------------------------

@pytest.fixture
def world(django_user_model, monkeypatch) -> dict[str, Any]:
    launched: list[int] = []

    def launch(run, **hooks):  # record, do not run (see the module's docstring)
        launched.append(run.pk)
        done = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    async def submit(run, settings=None):  # a replay, fork or resume: recorded the same way
        launched.append(run.pk)

    monkeypatch.setattr(execution, "launch", launch)
    # Executing one here would prepare it in another thread, on another connection, which
    # cannot see this test's uncommitted rows, and its recorder would then wait minutes for
    # SQLite's write lock that the test's transaction holds.
    monkeypatch.setattr(run_engine, "submit", submit)
    monkeypatch.setattr(runner, "start_experiment", lambda experiment: launched.append(
        experiment.pk))
    users = {  # no passwords (force_login): hashing three is most of a case's time
        "owner": django_user_model.objects.create_user("alice"),
        "other": django_user_model.objects.create_user("bob"),
        "staff": django_user_model.objects.create_superuser("root", password=None),
    }
    alice = users["owner"]
    agents = make_agents(scripted_profile("http://127.0.0.1:9/v1"), 2)
    run, second = (recorded_run(agents[0], alice, SECRET), recorded_run(agents[1], alice, "2?"))
    comparison = Comparison.objects.create(user=alice, question=SECRET)
    for position, r in enumerate((run, second)):
        ComparisonEntry.objects.create(comparison=comparison, position=position,
                                       agent=r.agent, run=r)
    suite = Suite.objects.create(name="Sums")
    Case.objects.create(suite=suite, position=1, question=SECRET, expected="4")
    earlier = runner.create_experiment(alice, suite, agents[:1], title=SECRET)
    experiment = runner.create_experiment(alice, suite, agents[:1], previous=earlier)
    conversation = Conversation.objects.create(user=alice, agent=agents[0], title=SECRET)
    ChatTurn.objects.create(conversation=conversation, run=second, position=1)
    token, _secret = create_token(alice, SECRET, "ingest")
    feedback = Feedback.objects.create(run=run, seq=1, name="note", note=SECRET, author=alice,
                                       author_name="alice")
    pcase = PlaygroundCase.objects.create(user=alice, name=SECRET, source_run=run, source_seq=1,
                                          messages=[{"role": "user", "content": SECRET}])
    queue = make_queue(users["staff"], [alice], name=SECRET, runs=[run])
    rule = Rule.objects.create(queue=queue, query="status=failed")
    live = LiveScorer.objects.create(name=SECRET, agent_name=run.agent_name, key="watch")
    LiveScore.objects.create(scorer=live, run=run, status="done", score=0.0, passed=False)
    Alert.objects.create(scorer=live, metric="score", op="below", threshold=0.5, window=1,
                         value=0.0, owner=alice)
    job = GatewaySession.objects.create(user=alice, for_runner=True, source=run, mode="replay",
                                        name=SECRET)
    ids = {"queue": queue.pk, "job": job.key, "item": queue.items.get().pk, "rule": rule.pk,
           "token": token.pk, "feedback": feedback.pk, "run": run.pk, "second": second.pk,
           "scorer": live.pk,
           "comparison": comparison.pk, "experiment": experiment.pk, "earlier": earlier.pk,
           "suite": suite.pk, "conversation": conversation.pk, "agent": agents[0].pk,
           "pcase": pcase.pk}
    return {"users": users, "ids": ids, "launched": launched}


def recorded_run(agent, user, question: str) -> Run:
    """A failed run with an llm step (1) and a tool step (2): every run URL has something."""
    run = create_run(agent, user, question)
    now = timezone.now()
    request = {"messages": [{"role": "user", "content": question}]}
    Step.objects.create(run=run, seq=1, kind="llm", name="scripted-model", input=request,
                        output={"content": "", "tool_calls": []}, started_at=now)
    Step.objects.create(run=run, seq=2, kind="tool", name="calculator", status="error",
                        input={"expression": "6*7"}, text="boom", started_at=now)
    Run.objects.filter(pk=run.pk).update(status="failed", error="boom", started_at=now,
                                         finished_at=now, step_count=2)
    return Run.objects.get(pk=run.pk)


def outcome(response: Any, *, a_list: bool) -> str:
    location = response.get("Location", "")
    if response.status_code == 302 and location.startswith("/login/"):
        return "login"
    if response.status_code == 302 and location.startswith("/admin/login/"):
        return "admin"
    if a_list and response.status_code == 200:
        return "ok" if SECRET in response.content.decode() else "hidden"
    if response.status_code in (200, 302, 400):  # 400: the form again, with its errors
        return "ok"
    return str(response.status_code)


def fill(value: Any, ids: dict[str, int]) -> Any:
    return value.format(**ids) if isinstance(value, str) else value


@pages_db
@pytest.mark.parametrize("name", sorted(MATRIX))
def test_who_gets_what(name, world):
    row, ids = MATRIX[name], world["ids"]
    got = {}
    for role in ROLES:  # the owner last: an action they take may change the row
        client = Client()
        if role != "anonymous":
            client.force_login(world["users"][role])
        data = {fill(k, ids): fill(v, ids) for k, v in (row.data or {}).items()}
        response = getattr(client, row.method)(fill(row.path, ids), data)
        got[role] = outcome(response, a_list=row.other == "hidden")
    assert got == row.expected(), name


async def visit(path: str, user: Any) -> str:
    hdrs = await sync_to_async(headers)(user)
    comm = WebsocketCommunicator(application, path, headers=hdrs)
    connected, _ = await comm.connect()
    assert connected  # refused sockets are accepted, so the browser sees the close code
    if await comm.receive_nothing(timeout=0.2):
        await comm.disconnect()
        return "accepted"
    frame = await comm.receive_json_from()
    closed = await comm.receive_output()
    assert frame["type"] == "error" and closed == {"type": "websocket.close", "code": 4403}
    return "refused"


@sockets_db
@pytest.mark.parametrize("pattern", sorted(SOCKETS))
async def test_who_may_open_each_socket(pattern, world):
    row, ids = SOCKETS[pattern], world["ids"]
    got = {role: await visit(fill(row.path, ids), world["users"].get(role)) for role in ROLES}
    assert got == row.expected()


@sockets_db
async def test_a_missing_run_or_conversation_is_refused_like_another_users(world):
    owner = world["users"]["owner"]
    assert await visit("/ws/runs/999999/", owner) == "refused"
    assert await visit("/ws/chat/999999/", owner) == "refused"
