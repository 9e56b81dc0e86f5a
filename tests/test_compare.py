"""The compare page: the summary table (pure), the form, permissions, rounds, rendering.

Runs that must execute talk to the scripted OpenAI-compatible server (tests/fake_openai.py);
finished runs for rendering tests are written directly as rows with known figures."""

from __future__ import annotations

import asyncio
import re
from types import SimpleNamespace

import pytest
from asgiref.sync import sync_to_async

from agentlab.compare.models import Comparison, ComparisonEntry
from agentlab.compare.summary import pairs, summarize
from agentlab.runs import execution
from agentlab.runs.registry import REGISTRY
from tests.factories import make_agents, scripted_profile
from tests.fake_openai import Reply
from traces.models import Run


def fig(name, status="succeeded", steps=4, llm=2, tools=1, tin=100, tout=20, cost=0.01,
        wall=1000.0, answer="42"):
    return SimpleNamespace(agent_name=name, status=status, step_count=steps, llm_calls=llm,
                           tool_calls=tools, tokens_in=tin, tokens_out=tout, cost_usd=cost,
                           wall_ms=wall, final_answer=answer, error="")


def best(summary, key):
    i = [c.key for c in summary.columns].index(key)
    return [r.label for r in summary.rows if r.cells[i].best]


# -- summary.py (pure) ---------------------------------------------------------------------


def test_the_lowest_value_of_each_column_is_the_best():
    s = summarize([fig("a", cost=0.03, wall=900, steps=6), fig("b", cost=0.01, wall=2000),
                   fig("c", cost=0.02, wall=1500, steps=3)])
    assert best(s, "cost_usd") == ["b"]
    assert best(s, "wall_ms") == ["a"]
    assert best(s, "steps") == ["c"]
    assert [c.text for c in s.rows[1].cells] == ["4", "2", "1", "120", "$0.0100", "2.00 s"]


def test_a_failed_run_is_never_the_best_even_when_cheapest():
    s = summarize([fig("ok", cost=0.05), fig("broke", status="failed", cost=0.0, steps=1)])
    assert best(s, "cost_usd") == ["ok"] and best(s, "steps") == ["ok"]
    assert s.rows[1].status == "failed"


def test_ties_are_all_marked_and_an_all_equal_column_marks_none():
    s = summarize([fig("a", tin=50, cost=0.0), fig("b", tin=50, cost=0.0),
                   fig("c", tin=90, cost=0.0)])
    assert best(s, "tokens") == ["a", "b"]
    assert best(s, "cost_usd") == []  # a free local model everywhere: nothing stands out


def test_missing_values_show_a_dash_and_are_not_ranked():
    s = summarize([fig("a", wall=None), fig("b", wall=3000)])
    i = [c.key for c in s.columns].index("wall_ms")
    assert s.rows[0].cells[i].text == "—" and best(s, "wall_ms") == ["b"]
    assert s.chart_data() == {"labels": ["a", "b"], "cost_usd": [0.01, 0.01], "wall_s": [0, 3.0]}


def test_pairs_lists_every_unordered_pair_once():
    assert pairs([1, 2, 3]) == [(1, 2), (1, 3), (2, 3)]


# -- pages ---------------------------------------------------------------------------------

with_db = pytest.mark.django_db(transaction=True)


@pytest.fixture
def agents(fake_llm):
    return make_agents(scripted_profile(fake_llm.base_url), 7)


def finished_comparison(user, agents, figures, question="What is 6*7?"):
    comparison = Comparison.objects.create(user=user, question=question)
    for pos, (agent, f) in enumerate(zip(agents, figures, strict=False)):
        run = Run.objects.create(user=user, agent=agent, agent_name=agent.name,
                                 paradigm=agent.paradigm, input=question, status=f.status,
                                 step_count=f.step_count, llm_calls=f.llm_calls,
                                 tool_calls=f.tool_calls, tokens_in=f.tokens_in,
                                 tokens_out=f.tokens_out, cost_usd=f.cost_usd,
                                 wall_ms=f.wall_ms, final_answer=f.final_answer)
        ComparisonEntry.objects.create(comparison=comparison, position=pos, agent=agent, run=run)
    return comparison


@with_db
@pytest.mark.parametrize("count", [0, 1, 7])
def test_fewer_than_two_or_more_than_six_agents_is_refused(client, user, agents, count):
    client.force_login(user)
    resp = client.post("/compare/", {"question": "Hi?",
                                     "agents": [a.pk for a in agents[:count]]})
    assert resp.status_code == 200  # the form again, with the reason
    errors = re.findall(r'data-field="agents">([^<]+)<', resp.content.decode())
    assert errors and errors[0].startswith("Choose 2 to 6 agents to compare")
    if count:
        assert f"({count} chosen)" in errors[0]
    assert not Comparison.objects.exists() and not Run.objects.exists()


@with_db
def test_a_blank_question_is_refused(client, user, agents):
    client.force_login(user)
    resp = client.post("/compare/", {"question": "  ", "agents": [agents[0].pk, agents[1].pk]})
    assert 'data-field="question"' in resp.content.decode()
    assert not Comparison.objects.exists()


@with_db
async def test_posting_starts_one_run_per_agent_concurrently(async_client, user, agents,
                                                               fake_llm, monkeypatch):
    fake_llm.responder = lambda body: Reply(text="It is 42.", usage=(30, 6))
    launched = {}  # run id -> its task, as execution.launch made it (a run may end before we look)
    launch = execution.launch

    def recording_launch(run, **hooks):
        launched[run.pk] = task = launch(run, **hooks)
        return task

    monkeypatch.setattr(execution, "launch", recording_launch)
    await async_client.aforce_login(user)
    chosen = [agents[0], agents[1], agents[2]]
    resp = await async_client.post("/compare/", {"question": "What is 6*7?",
                                                 "agents": [a.pk for a in chosen]})
    comparison = await Comparison.objects.aget()
    assert resp.status_code == 302 and resp["Location"] == f"/compare/{comparison.pk}/"
    entries = [e async for e in comparison.entries.select_related("run").order_by("position")]
    assert [e.run.agent_name for e in entries] == [a.name for a in chosen]
    # All three are tasks of this loop, started before the redirect came back.
    started = [launched[e.run_id] for e in entries]
    assert len(set(started)) == 3
    outcomes = await asyncio.wait_for(asyncio.gather(*started), 20)
    assert [o.status for o in outcomes] == ["succeeded"] * 3
    runs = [r async for r in Run.objects.filter(user=user).order_by("pk")]
    assert {r.input for r in runs} == {"What is 6*7?"} and len(runs) == 3
    assert all(r.final_answer == "It is 42." for r in runs)

    page = await async_client.get(f"/compare/{comparison.pk}/")
    html = page.content.decode()
    assert html.count('class="card compare-col"') == 3 and "<h2>Summary</h2>" in html
    # Identical replies: only the wall time tells them apart.
    assert html.count('class="num best" data-col="wall_ms"') == 1
    assert 'class="num best" data-col="tokens"' not in html
    assert html.count("/runs/diff/?a=") == 3


@with_db
def test_the_summary_renders_server_side_with_the_best_marked(client, user, agents):
    c = finished_comparison(user, agents, [fig("x", cost=0.03, wall=800),
                                           fig("y", cost=0.01, wall=5000, steps=9),
                                           fig("z", status="failed", cost=0.0, steps=1)])
    client.force_login(user)
    html = client.get(f"/compare/{c.pk}/").content.decode()
    table = html[html.index('class="grid compare-summary"'):]
    rows = re.findall(r"<tr data-run=.*?</tr>", table, re.S)
    assert len(rows) == 3
    assert re.search(r'class="num best" data-col="cost_usd">\$0.0100', rows[1])
    assert re.search(r'class="num best" data-col="wall_ms">800 ms', rows[0])
    assert "best" not in rows[2]  # the failed run, though it cost nothing
    assert 'id="compare-chart-data"' in html and "hx-get" not in table
    runs = [e.run_id for e in c.entries.order_by("position")]
    assert f"/runs/diff/?a={runs[0]}&amp;b={runs[2]}" in html


@with_db
def test_while_running_the_summary_polls_and_shows_no_table(client, user, agents):
    c = finished_comparison(user, agents, [fig("x"), fig("y", status="running")])
    client.force_login(user)
    html = client.get(f"/compare/{c.pk}/summary/?round=1").content.decode()
    assert f'hx-get="/compare/{c.pk}/summary/?round=1"' in html
    assert "appears when every run has finished" in html and "grid compare-summary" not in html
    Run.objects.filter(status="running").update(status="succeeded")
    html = client.get(f"/compare/{c.pk}/summary/?round=1").content.decode()
    assert "hx-get" not in html and "grid compare-summary" in html


@with_db
def test_another_users_comparison_is_a_404_and_staff_see_all(client, user, other_user, staff,
                                                             agents):
    c = finished_comparison(other_user, agents, [fig("x"), fig("y")], question="Bob's secret")
    client.force_login(user)
    for url in (f"/compare/{c.pk}/", f"/compare/{c.pk}/summary/"):
        assert client.get(url).status_code == 404
    assert client.post(f"/compare/{c.pk}/rerun/").status_code == 404
    assert "Bob&#x27;s secret" not in client.get("/compare/").content.decode()
    client.force_login(staff)
    assert "Bob&#x27;s secret" in client.get("/compare/").content.decode()
    assert client.get(f"/compare/{c.pk}/").status_code == 200


@with_db
def test_anonymous_users_are_sent_to_log_in(client):
    resp = client.get("/compare/")
    assert resp.status_code == 302 and resp["Location"].startswith("/login/")


@with_db
async def test_rerun_adds_a_round_and_earlier_rounds_stay(async_client, user, agents, fake_llm):
    fake_llm.responder = lambda body: Reply(text="Again 42.")
    c = await sync_to_async(finished_comparison)(user, agents, [fig("x"), fig("y")])
    await async_client.aforce_login(user)
    resp = await async_client.post(f"/compare/{c.pk}/rerun/")
    assert resp.status_code == 302
    new = [e async for e in c.entries.filter(round=2).order_by("position")]
    assert [e.agent_id for e in new] == [agents[0].pk, agents[1].pk]
    await asyncio.wait_for(asyncio.gather(*[t for e in new
                                            if (t := REGISTRY.task(e.run_id))]), 20)
    html = (await async_client.get(f"/compare/{c.pk}/")).content.decode()
    assert 'aria-current="page">2<' in html and 'href="?round=1"' in html
    assert html.count("Again 42.") >= 2
    old = (await async_client.get(f"/compare/{c.pk}/?round=1")).content.decode()
    assert "Again 42." not in old and (await async_client.get(
        f"/compare/{c.pk}/?round=9")).status_code == 404


@with_db
def test_rerun_needs_two_agents_that_still_exist(client, user, agents):
    c = finished_comparison(user, agents, [fig("x"), fig("y")])
    agents[1].delete()
    client.force_login(user)
    resp = client.post(f"/compare/{c.pk}/rerun/", follow=True)
    assert "Only 1 of this comparison&#x27;s agents still exist" in resp.content.decode()
    assert c.entries.count() == 2
