"""The one way a run comes to be (agentlab/runs/start.py): the room under the per-user limit and
the rows in one transaction, and every place that makes runs going through it.

Real parts: the database, the pages and views (Django's test client), the agents on the
scripted model server; the limit is lowered through Django's settings, and "every place goes
through it" is shown by making its room check refuse everything: each entry point then refuses
with its message."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse

from agentlab.chat import turns
from agentlab.chat.models import ChatTurn, Conversation
from agentlab.code_agents import calls
from agentlab.compare.models import Comparison
from agentlab.evals import pairs, runner
from agentlab.evals.models import Case, Experiment, Suite
from agentlab.runs import start
from agentlab.runs.snapshot import snapshot
from tests.factories import make_agents, scripted_profile
from traces.models import Run
from traces.owners import process_id

pytestmark = pytest.mark.django_db(transaction=True)

REFUSED = "refused by the room check of start_runs"
ROOT = Path(__file__).resolve().parents[1]


def going(agent, user, n: int = 1) -> list[Run]:
    """`n` runs of `user` that hold a place (running on some process)."""
    made = start.start_runs(user, [agent] * n, "busy", places=0)
    Run.objects.filter(pk__in=[r.pk for r in made]).update(status="running", worker="else:1")
    return made


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("alice")


@pytest.fixture
def refusing(monkeypatch, settings):
    """start_runs' room check (and reserve's) refuses every run, whatever the limit says: a
    place that still makes runs does not go through agentlab/runs/start.py."""
    settings.AGENTLAB_MAX_ACTIVE_RUNS = 0  # the real limit is off

    def refuse(user, more: int = 1) -> None:
        raise start.RunLimit(REFUSED)

    monkeypatch.setattr(start, "ensure_room", refuse)


# -- the function ------------------------------------------------------------------------------

def test_room_for_every_run_or_none_is_created(agent, user, settings):
    settings.AGENTLAB_MAX_ACTIVE_RUNS = 2
    going(agent, user)
    with pytest.raises(start.RunLimit, match="You already have 1 run going and one user may "
                                             "have 2 at once, so 2 more runs cannot start"):
        start.start_runs(user, [agent, agent], "6*7?", claim=True)
    assert Run.objects.count() == 1
    run = start.start_run(user, agent, "6*7?", claim=True)  # the last place
    assert (run.status, run.worker, run.input, run.user) == ("queued", process_id(), "6*7?", user)
    with pytest.raises(start.RunLimit, match="so another run cannot start"):
        start.start_run(user, agent, "6*7?")
    # An unlimited caller (the terminal, a code agent, an admitted experiment's pair) is not.
    assert start.start_run(user, agent, "6*7?", places=0).worker == ""


def test_an_agent_that_cannot_run_leaves_none_of_the_runs(agent, user, monkeypatch):
    made = []

    def second_fails(row, owner, question, *, history, timeout_cap_s, **fields):
        if made:
            raise ValueError("no agent named Ghost")
        made.append(Run.objects.create(user=owner, agent=row, input=question, **fields))
        return made[-1]

    monkeypatch.setattr(start, "create_run", second_fails)
    with pytest.raises(ValueError, match="Ghost"):
        start.start_runs(user, [agent, agent], "6*7?")
    assert made and not Run.objects.exists()  # the first one was rolled back with it


def test_claim_says_whose_and_a_bound_snapshot_is_used_as_it_is(agent, user):
    source = start.start_run(user, agent, "6*7?", history=[{"role": "user", "content": "hi"}])
    assert source.worker == "" and source.history == [{"role": "user", "content": "hi"}]
    assert source.agent_snapshot["name"] == agent.name
    snap = {**snapshot(agent), "fork": {"of": source.pk, "seq": 2}}
    fork = start.start_run(user, snap, source.input, history=source.history,
                           parent_run=source, fork_seq=2, claim="workers:7")
    assert (fork.parent_run, fork.fork_seq, fork.worker) == (source, 2, "workers:7")
    assert (fork.agent_id, fork.agent_name, fork.paradigm) == (agent.pk, agent.name, "react")
    assert fork.agent_snapshot == snap and fork.input == "6*7?"


def test_reserve_takes_places_only_inside_a_transaction(agent, user, settings):
    settings.AGENTLAB_MAX_ACTIVE_RUNS = 2
    going(agent, user)
    with pytest.raises(RuntimeError, match="inside the transaction"):
        start.reserve(user, 1)
    with transaction.atomic():
        start.reserve(user, 1)
        with pytest.raises(start.RunLimit, match="so 2 more runs cannot start"):
            start.reserve(user, 2)


# -- every place that makes runs goes through it -----------------------------------------------

def test_a_one_off_run_goes_through_it(agent, user, refusing):
    response = logged_in(user).post("/chat/run/", {"agent": agent.pk, "question": "6*7?"},
                                    follow=True)
    assert REFUSED in response.content.decode() and not Run.objects.exists()


def test_a_chat_turn_goes_through_it(agent, user, refusing):
    conversation = Conversation.objects.create(user=user, agent=agent)
    with pytest.raises(start.RunLimit, match=REFUSED):
        turns.add_turn_now(conversation.pk, "Hi")
    assert not ChatTurn.objects.exists() and not Run.objects.exists()


def test_a_comparison_goes_through_it(user, fake_llm, refusing):
    agents = make_agents(scripted_profile(fake_llm.base_url), 2)
    response = logged_in(user).post("/compare/", {"question": "6*7?",
                                                  "agents": [a.pk for a in agents]})
    assert REFUSED in response.content.decode()
    assert not Comparison.objects.exists() and not Run.objects.exists()


def test_an_experiment_goes_through_it(user, fake_llm, refusing):
    agents = make_agents(scripted_profile(fake_llm.base_url), 2)
    suite = Suite.objects.create(name="Sums")
    Case.objects.create(suite=suite, position=0, question="2+2?", expected="4")
    response = logged_in(user).post("/evals/", {"suite": suite.pk, "concurrency": 2,
                                                "agents": [a.pk for a in agents]})
    assert REFUSED in response.content.decode() and not Experiment.objects.exists()


def test_a_replay_goes_through_it(agent, user, refusing):
    source = start.start_run(user, agent, "6*7?", places=0)
    Run.objects.filter(pk=source.pk).update(status="succeeded")
    response = logged_in(user).post(reverse("run_replay", args=[source.pk]),
                                    {"tools": "recorded"}, follow=True)
    assert REFUSED in response.content.decode() and Run.objects.count() == 1


def test_a_replay_over_the_limit_is_refused_and_nothing_is_created(agent, user, settings):
    source = start.start_run(user, agent, "6*7?", places=0)
    Run.objects.filter(pk=source.pk).update(status="succeeded")
    settings.AGENTLAB_MAX_ACTIVE_RUNS = 1
    going(agent, user)
    response = logged_in(user).post(reverse("run_replay", args=[source.pk]),
                                    {"tools": "recorded"}, follow=True)
    assert "You already have 1 run going" in response.content.decode()
    assert Run.objects.count() == 2


@pytest.fixture
def spy(monkeypatch):
    """What each start_runs call was asked: (places, claim)."""
    seen: list[tuple] = []
    real = start.start_runs

    def record(user, agents, question, **options):
        seen.append((options.get("places"), options.get("claim", False)))
        return real(user, agents, question, **options)

    monkeypatch.setattr(start, "start_runs", record)
    return seen


def test_an_experiments_pairs_and_code_agents_go_through_it_unlimited(agent, user, spy,
                                                                      refusing):
    suite = Suite.objects.create(name="Sums")
    Case.objects.create(suite=suite, position=0, question="2+2?", expected="4")
    experiment = runner.create_experiment(user, suite, [agent])
    result = experiment.results.get()
    _result, _case, run = pairs.start_pair(result.pk, worker="workers:3")
    assert (run.worker, run.user, run.input) == ("workers:3", user, "2+2?")
    coded = calls._create_run(agent, user, "6*7?", [])
    assert coded.worker == process_id()
    assert spy == [(0, "workers:3"), (0, True)]  # places taken when the experiment started


def test_nothing_outside_agentlab_runs_makes_a_run_by_hand():
    """create_run, ensure_room and Run.objects.create are agentlab/runs/'s own: every other
    place calls agentlab.runs.start (or reads the room to claim a run, runs/execution.py).
    The two exceptions make finished runs' rows for benchmarks, not runs that start."""
    records = {"agentlab/management/commands/bench_hostile.py",
               "agentlab/management/commands/bench_dashboard.py"}
    found = []
    for path in sorted((ROOT / "agentlab").rglob("*.py")):
        where = path.relative_to(ROOT).as_posix()
        if where.startswith("agentlab/runs/") or where in records:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = ast.unparse(node.func)
            if (name.rsplit(".", 1)[-1] in ("create_run", "ensure_room")
                    or name in ("Run.objects.create", "Run.objects.bulk_create")):
                found.append(f"{where}:{node.lineno} {name}")
    assert found == []
