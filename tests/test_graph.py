"""The graph of a run: who called whom, for runs the real paradigms recorded (a debate, a
supervisor, a LATS search on scripted models), received framework traces, and a big run the
database groups without reading its steps; its page, the step it is at, a node's steps, two
runs side by side."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests import graph_runs
from tests.factories import make_run
from traces import graph_summary
from traces.graph import MAX_NODES, ROOT, Group, aggregate, build, compare, root_role
from traces.graph_layout import draw, layers
from traces.graph_query import groups, run_graph
from traces.models import RunGraph, Step

MODEL = "model:scripted-model"


def edges(graph) -> dict[tuple[str, str], int]:
    return {pair: e.figures.count for pair, e in graph.edges.items()}


def summary(found: list[Group]) -> dict:
    graph = build(found)
    return {"edges": {k: (e.figures.count, e.figures.tokens, e.figures.errors,
                          round(e.figures.ms, 3)) for k, e in graph.edges.items()},
            "nodes": {k: (n.figures.count, n.figures.first) for k, n in graph.nodes.items()}}


# ---------------------------------------------------------------------------- the structure


def test_a_debate_is_its_members_turns_each_calling_the_model() -> None:
    graph = build(aggregate(graph_runs.debate_steps()), root_label="Team")
    assert edges(graph) == {
        (ROOT, "agent:Ann"): 2, (ROOT, "agent:Bob"): 2, (ROOT, "agent:judge"): 1,
        ("agent:Ann", MODEL): 2, ("agent:Bob", MODEL): 2, ("agent:judge", MODEL): 1}
    assert graph.nodes[ROOT].label == "Team" and graph.nodes[MODEL].figures.tokens == 5 * 15
    assert layers(graph) == {ROOT: 0, "agent:Ann": 1, "agent:Bob": 1, "agent:judge": 1,
                             MODEL: 2}


def test_a_supervisor_calls_its_workers() -> None:
    role = root_role("multi_agent", {"params": {"mode": "supervisor"}})
    graph = build(aggregate(graph_runs.supervisor_steps()), root_role=role)
    assert edges(graph) == {(ROOT, MODEL): 3, (ROOT, "agent:researcher"): 1,
                            (ROOT, "agent:writer"): 1, ("agent:researcher", MODEL): 1,
                            ("agent:writer", MODEL): 1}
    # Read without the paradigm's word, the supervisor is a role of its own.
    plain = build(aggregate(graph_runs.supervisor_steps()))
    assert edges(plain)[(ROOT, "agent:supervisor")] == 3


def test_lats_is_its_search_tree_by_depth_with_the_evaluator_scoring_each_node() -> None:
    graph = build(aggregate(graph_runs.lats_steps()))
    found = edges(graph)
    assert found[(ROOT, "search:depth 0")] == 1
    assert found[("search:depth 0", "search:depth 1")] == 2
    assert found[("search:depth 1", "search:depth 2")] == 2
    for depth in (1, 2):  # each candidate: the agent's call, its tool, the evaluator's score
        assert found[(f"search:depth {depth}", MODEL)] == 2
        assert found[(f"search:depth {depth}", "tool:population")] == 2
        assert found[(f"search:depth {depth}", "agent:evaluator")] == 2
    assert found[("agent:evaluator", MODEL)] == 4
    assert found[(ROOT, "agent:solver")] == 1
    layer = layers(graph)
    assert [layer[f"search:depth {d}"] for d in range(3)] == [1, 2, 3]
    # a callee stands right of all its callers: the model right of the evaluator
    assert layer[MODEL] > layer["agent:evaluator"] > layer["search:depth 2"]


def test_errors_count_on_the_node_and_the_edge_they_came_by() -> None:
    steps = graph_runs.debate_steps()
    steps[1].status = "error"  # Ann's first call
    graph = build(aggregate(steps))
    assert graph.edges[("agent:Ann", MODEL)].figures.errors == 1
    assert graph.nodes[MODEL].figures.errors == 1
    assert graph.edges[(ROOT, "agent:Bob")].figures.errors == 0


def test_past_max_nodes_the_quietest_fold_into_one_node_per_type() -> None:
    steps = [{"kind": "tool", "name": f"tool {i}"} for i in range(MAX_NODES + 10)]
    steps += [{"kind": "tool", "name": "busy"}] * 5
    graph = build(aggregate(_records(steps)))
    assert len(graph.nodes) <= MAX_NODES and graph.steps == len(steps)
    assert graph.edges[(ROOT, "tool:busy")].figures.count == 5
    other = graph.nodes["tool:…other"]
    assert other.label == "other tools" and other.folded > 0
    assert sum(e.figures.count for e in graph.edges.values()) == len(steps)


def test_the_drawing_is_the_same_every_time_and_left_to_right_by_depth() -> None:
    graph = build(aggregate(graph_runs.lats_steps()))
    first, second = draw(graph), draw(build(aggregate(graph_runs.lats_steps())))
    assert [(n.node.key, n.x, n.y) for n in first.nodes] == \
        [(n.node.key, n.x, n.y) for n in second.nodes]
    x = {n.node.key: n.x for n in first.nodes}
    assert x[ROOT] < x["search:depth 0"] < x["search:depth 1"] < x["search:depth 2"]
    most = max(first.edges, key=lambda e: e.edge.figures.count)
    least = min(first.edges, key=lambda e: e.edge.figures.count)
    assert most.width > least.width


def test_two_graphs_compared() -> None:
    debate = build(aggregate(graph_runs.debate_steps()))
    fewer = build(aggregate([s for s in graph_runs.debate_steps() if s.role != "judge"]))
    difference = compare(debate, fewer)
    assert difference.nodes_only_a == ["agent:judge"] and not difference.nodes_only_b
    assert difference.edges_only_a == [(ROOT, "agent:judge"), ("agent:judge", MODEL)]
    assert (MODEL, 5, 4) in difference.counts
    assert compare(debate, debate).same


def _records(steps: list[dict]) -> list:
    from traces.schema import Step

    return [Step(seq=i, **s) for i, s in enumerate(steps, start=1)]


# ---------------------------------------------------------------------------- the database


@pytest.mark.django_db
@pytest.mark.parametrize("steps", ["debate_steps", "supervisor_steps", "lats_steps"])
def test_the_database_groups_a_recorded_run_as_memory_does(user, steps) -> None:
    recorded = getattr(graph_runs, steps)()
    run = graph_runs.record(user, recorded)
    found, cut = groups(run)
    assert not cut and summary(found) == summary(aggregate(recorded))


@pytest.mark.django_db
def test_received_framework_traces_show_their_agent_model_and_tools(user) -> None:
    agents = graph_runs.imported(user, "openai-agents")
    assert edges(run_graph(agents)) == {
        (ROOT, "agent:weather-agent"): 1, ("agent:weather-agent", "model:gpt-4o-mini"): 2,
        ("agent:weather-agent", "tool:get_weather"): 1}
    smol = run_graph(graph_runs.imported(user, "smolagents"))
    assert edges(smol) == {(ROOT, "model:gpt-4o-mini"): 2, (ROOT, "tool:get_weather"): 1,
                           (ROOT, "tool:final_answer"): 1}
    assert smol.nodes["model:gpt-4o-mini"].figures.tokens > 0
    for capture in ("langgraph", "llamaindex", "openai", "genai"):
        run = graph_runs.imported(user, capture)
        found, _ = groups(run)
        assert summary(found) == summary(aggregate(s.to_record() for s in run.steps.all()))
        assert any(k.startswith("tool:get_weather") for k in run_graph(run).nodes)


def _big(user, n: int):
    """n steps: turns of two members, each with a model call and a tool call under it."""
    steps = []
    for i in range(n // 3):
        turn = 3 * i + 1
        role = "Ann" if i % 2 else "Bob"
        steps += [{"kind": "message", "role": role, "name": f"turn {i}", "text": "x" * 200},
                  {"kind": "llm", "role": role, "name": "m", "parent": turn, "tokens_in": 10,
                   "input": {"messages": [{"role": "user", "content": "y" * 200}]}},
                  {"kind": "tool", "role": role, "name": "search", "parent": turn,
                   "status": "error" if i % 10 == 0 else "ok"}]
    return make_run(user, steps, paradigm="multi_agent")


@pytest.mark.django_db
def test_a_big_run_renders_from_the_aggregate_not_step_by_step(client, user) -> None:
    client.force_login(user)
    small, big = _big(user, 30), _big(user, 6000)
    client.get(reverse("run_graph", args=[small.pk]))  # what a process's first page does
    counted = {}
    for run in (small, big):
        cache.clear()  # a finished run's groups are kept: measure the first view
        with CaptureQueriesContext(connection) as queries:
            page = client.get(reverse("run_graph", args=[run.pk]) + "?step=5")
        assert page.status_code == 200
        counted[run.pk] = [q["sql"] for q in queries.captured_queries]
    assert len(counted[big.pk]) == len(counted[small.pk]) <= 12
    # No query reads a step's payloads for the graph, only the step it is at and its parents.
    assert not any('"input"' in sql and "GROUP BY" in sql for sql in counted[big.pk])
    assert sum('"text"' in sql for sql in counted[big.pk]) == 0
    with CaptureQueriesContext(connection) as again:
        client.get(reverse("run_graph", args=[big.pk]) + "?node=agent:Ann")
    assert not any("GROUP BY" in q["sql"] for q in again.captured_queries)  # kept
    body = page.content.decode()
    assert body.count("×1,000") == 6  # to each member, from each to the model and the tool
    graph = run_graph(big)
    assert graph.edges[("agent:Bob", "tool:search")].figures.errors == 200  # every tenth turn
    assert graph.edges[("agent:Ann", "tool:search")].figures.errors == 0
    assert graph.steps == 6000


def _row_by_row(run):
    found, cut = groups(run)
    return build(found, root_label=run.agent_name, cut=cut,
                 root_role=root_role(run.paradigm, run.agent_snapshot))


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["supervisor", "lats", "openai-agents", "langgraph"])
def test_a_long_runs_graph_is_its_stored_aggregate_equal_to_the_row_by_row_one(
        client, user, monkeypatch, kind) -> None:
    monkeypatch.setattr(graph_summary, "SUMMED_FROM", 3)  # these runs count as long
    if kind in ("supervisor", "lats"):  # a paradigm's run: summed on its first view
        run = graph_runs.record(user, getattr(graph_runs, f"{kind}_steps")(),
                                paradigm="lats" if kind == "lats" else "multi_agent",
                                agent_snapshot={"params": {"mode": kind}})
        assert not RunGraph.objects.filter(run=run).exists()
    else:  # an imported trace: summed as the import finishes
        run = graph_runs.imported(user, kind)
        assert RunGraph.objects.get(run=run).steps == run.step_count
    expected = _row_by_row(run)
    client.force_login(user)
    client.get(reverse("run_graph", args=[run.pk]))
    cache.clear()
    with CaptureQueriesContext(connection) as queries:
        page = client.get(reverse("run_graph", args=[run.pk]))
    assert page.status_code == 200
    assert not any("GROUP BY" in q["sql"] for q in queries.captured_queries)  # not the steps
    shown = run_graph(run)
    assert shown == expected and shown.edges and shown.steps == run.step_count
    assert f"×{max(e.figures.count for e in expected.edges.values()):,}" in page.content.decode()


@pytest.mark.django_db
def test_the_aggregate_is_summed_again_when_the_run_changes(user, monkeypatch) -> None:
    monkeypatch.setattr(graph_summary, "SUMMED_FROM", 3)
    run = graph_runs.record(user, graph_runs.debate_steps())
    before = run_graph(run)
    last = graph_runs.debate_steps()[1]
    last.seq = run.step_count + 1
    Step.from_record(run.pk, last).save()
    run.step_count += 1
    run.save()
    after = run_graph(run)
    assert after.steps == before.steps + 1 == RunGraph.objects.get(run=run).steps
    run.status = "running"  # a live run is grouped each time, never from the stored rows
    run.step_count += 5
    assert run_graph(run).steps == after.steps


# ---------------------------------------------------------------------------- the pages


@pytest.fixture
def debate(user):
    return graph_runs.record(user, graph_runs.debate_steps(), agent_name="Debate team")


@pytest.mark.django_db
def test_the_graph_page_draws_the_run_and_marks_the_step(client, user, debate) -> None:
    client.force_login(user)
    body = client.get(reverse("run_graph", args=[debate.pk]) + "?step=4").content.decode()
    assert "<svg" in body and 'data-key="agent:Ann"' in body and "Debate team" in body
    # Step 4 is Bob's first call: the model's node, reached by the edge Bob → model.
    assert 'class="g-node t-model at"' in body
    assert 'class="g-edge at" data-source="agent:Bob" data-target="model:scripted-model"' in body
    assert body.count(" at\"") == 2
    # The figures' table, and the run page's link here.
    assert "<th>Caller</th>" in body
    run_page = client.get(reverse("run", args=[debate.pk])).content.decode()
    assert f'href="/runs/{debate.pk}/graph/"' in run_page


@pytest.mark.django_db
def test_the_step_it_is_at_as_the_scrubber_asks(client, user, debate) -> None:
    client.force_login(user)
    place = client.get(reverse("run_graph_step", args=[debate.pk, 3])).json()
    assert place == {"seq": 3, "node": "agent:Bob", "edges": [[ROOT, "agent:Bob"]]}
    assert client.get(reverse("run_graph_step", args=[debate.pk, 99])).status_code == 404


@pytest.mark.django_db
def test_clicking_a_node_lists_its_steps(client, user, debate) -> None:
    client.force_login(user)
    body = client.get(reverse("run_graph", args=[debate.pk]) + "?node=agent:Ann").content.decode()
    assert 'id="node-steps"' in body and "Steps at Ann" in body
    assert [f"/runs/{debate.pk}/?step={n}" in body for n in (1, 2, 3, 5, 6)] == \
        [True, True, False, True, True]


@pytest.mark.django_db
def test_names_from_a_trace_are_text_never_markup(client, user) -> None:
    client.force_login(user)
    evil = '<script>alert(1)</script><img src=x onerror=alert(2)>'
    run = make_run(user, [{"kind": "tool", "name": evil}, {"kind": "llm", "role": evil,
                                                            "name": "</text><svg onload=x>"}])
    body = client.get(reverse("run_graph", args=[run.pk]) + "?node=tool:x").content.decode()
    assert "<script>alert" not in body and "<img src=x" not in body and "<svg onload" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body


@pytest.mark.django_db
def test_two_runs_side_by_side_from_the_diff_page(client, user, debate) -> None:
    client.force_login(user)
    other = graph_runs.record(user, [s for s in graph_runs.debate_steps() if s.role != "judge"])
    diff = client.get(reverse("run_diff") + f"?a={debate.pk}&b={other.pk}").content.decode()
    url = reverse("run_graphs") + f"?a={debate.pk}&amp;b={other.pk}"
    assert f'href="{url}"' in diff and "Graphs side by side" in diff
    body = client.get(reverse("run_graphs") + f"?a={debate.pk}&b={other.pk}").content.decode()
    assert body.count("<svg") == 2 and 'id="grapha"' in body and 'id="graphb"' in body
    assert "only: node agent:judge" in body and "model:scripted-model: 5 in A, 4 in B" in body


@pytest.mark.django_db
def test_another_users_run_has_no_graph(client, user, other_user, debate) -> None:
    client.force_login(other_user)
    assert client.get(reverse("run_graph", args=[debate.pk])).status_code == 404
    assert client.get(reverse("run_graph_step", args=[debate.pk, 1])).status_code == 404
    mine = make_run(other_user)
    assert client.get(reverse("run_graphs") + f"?a={mine.pk}&b={debate.pk}").status_code == 404
