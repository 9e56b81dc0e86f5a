"""The dashboard: its aggregates against figures computed by hand on a handful of fixture runs
(rows written directly, with known statuses, durations, roles, tool errors, format errors and
reflections), permissions, periods, links to the runs list and the page itself."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from html import unescape

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agentlab.dashboard.percentiles import percentiles
from agentlab.dashboard.period import DashboardForm
from agentlab.dashboard.queries import figures
from agentlab.models import Tool
from tests.factories import run_with_totals
from traces.models import Run, Step

pytestmark = pytest.mark.django_db


def add_steps(run, *specs):
    """specs: (kind, role, name, status, duration_ms, output, text)."""
    start = run.steps.count()
    Step.objects.bulk_create(Step(
        run=run, seq=start + i, kind=kind, role=role, name=name, status=status,
        duration_ms=ms, output=output, text=text, started_at=timezone.now(),
        meta={"reused": "#E1"} if name == "reused" else {})
        for i, (kind, role, name, status, ms, output, text) in enumerate(specs, 1))


def llm(role, ms):
    return ("llm", role, "m-small", "ok", ms, None, "")


def tool(name, ok=True, ms=10.0, error_type=None, text="fine"):
    output = {"ok": ok, "error_type": error_type, "error": None if ok else text}
    return ("tool", "agent", name, "ok" if ok else "error", ms, output, text)


@pytest.fixture
def runs(user, other_user):
    """Alice: four finished Alpha runs, one running, two Beta runs, one old run; Bob: one."""
    r1 = run_with_totals(user, steps=4, llm=2, tools=1, tin=100, tout=20, cost=0.01, refl=1)
    r2 = run_with_totals(user, status="failed", steps=10, llm=5, tools=3, tin=300, tout=50,
                         cost=0.03, fmt=2, refl=1)
    r3 = run_with_totals(user, steps=6, llm=3, tools=2, tin=200, tout=30, cost=0.02, fmt=1, refl=2)
    r4 = run_with_totals(user, status="timed_out", steps=20, llm=8, tools=6, tin=400, tout=80,
                         cost=0.04)
    run_with_totals(user, status="running", steps=3)
    b1 = run_with_totals(user, agent="Beta", paradigm="plan_execute", model="m-big", steps=8,
                         llm=4, tools=0, tin=1000, tout=100, cost=0.5)
    run_with_totals(user, agent="Beta", paradigm="plan_execute", model="m-big", status="cancelled",
                    steps=2, llm=1, tools=0, tin=10, tout=0, cost=0.0)
    run_with_totals(user, agent="Alpha", steps=50, days_ago=40)
    bob = run_with_totals(other_user, agent="Alpha", steps=100, llm=40, tools=30, cost=9.0)
    # Alpha's step durations: execution 10..100 ms, planning 100/300, reflection 500, tools.
    add_steps(r1, llm("planner", 100), *(llm("agent", ms) for ms in (10, 20, 30, 40, 50)),
              tool("calculator", ms=5), tool("calculator", ms=15))
    add_steps(r2, llm("replanner", 300), *(llm("executor", ms) for ms in (60, 70, 80, 90, 100)),
              llm("evaluator", 500),
              tool("calculator", ok=False, ms=1, error_type="validation",
                   text="Error: invalid arguments for calculator: expression is required"),
              tool("calculator", ok=False, ms=2, error_type="validation",
                   text="Error: invalid arguments for calculator: expression is required"),
              tool("get_weather", ok=False, ms=30_000, error_type="timeout",
                   text="Error: tool get_weather timed out after 30 s"),
              tool("reused", ok=False, ms=0.0))
    add_steps(r3, tool("get_weather", ms=200),
              ("tool", "agent", "read_file", "error", 3.0, None, "(error: no such file)\nmore"),
              ("thought", "agent", "", "ok", None, None, "thinking"))
    add_steps(b1, llm("planner", 1000), llm("solver", 2000))
    add_steps(bob, llm("agent", 99_999), tool("calculator", ok=False, error_type="exception"))
    return {"r1": r1, "r2": r2, "r3": r3, "r4": r4, "b1": b1, "bob": bob}


def period(**query):
    return DashboardForm(query).chosen()


def by_key(found):
    return {g.key: g for g in found.groups}


def test_per_group_figures_match_the_hand_computed_ones(runs, user):
    found = figures(user, period(period="30d"))
    alpha, beta = by_key(found)["Alpha"], by_key(found)["Beta"]
    assert found.runs == 6 and found.in_progress == 1  # the running run is counted apart
    assert alpha.outcomes == {"succeeded": 2, "stopped": 0, "failed": 1, "timed_out": 1,
                              "cancelled": 0, "interrupted": 0}
    assert alpha.completion_rate == 0.5 and beta.completion_rate == 0.5
    assert alpha.avg == {"steps": 10, "llm_calls": 4.5, "tool_calls": 3}
    # Nearest rank: p95 of [4, 6, 10, 20] is the 4th value; of [2, 8] the 2nd.
    assert alpha.p95 == {"steps": 20, "llm_calls": 8, "tool_calls": 6}
    assert beta.p95["steps"] == 8
    assert alpha.tokens == 1180 and alpha.tokens_per_run == 295
    assert alpha.cost_usd == pytest.approx(0.10) and alpha.cost_per_run == pytest.approx(0.025)
    assert alpha.format_error_rate == 0.5  # r2 and r3 of four runs
    assert alpha.format_errors_per_call == pytest.approx(3 / 18)
    assert alpha.reflection_rate == 0.75  # r1, r2, r3
    assert alpha.reflection_success == pytest.approx(2 / 3)  # r1 and r3 succeeded
    assert beta.reflection_success is None  # no run reflected: no share to show


def test_latency_is_split_by_phase_with_p50_and_p95(runs, user):
    found = figures(user, period(period="30d"))
    alpha = by_key(found)["Alpha"].phases
    assert alpha["execution"].calls == 10
    assert (alpha["execution"].p50_ms, alpha["execution"].p95_ms) == (50, 100)
    assert (alpha["planning"].p50_ms, alpha["planning"].p95_ms) == (100, 300)
    assert (alpha["reflection"].calls, alpha["reflection"].p95_ms) == (1, 500)
    # Tools: 5, 15, 1, 2, 30000, 200, 3 ms (the reused result is no call): p50 = 4th = 5.
    assert alpha["tools"].calls == 7 and alpha["tools"].p50_ms == 5
    assert alpha["tools"].p95_ms == 30_000 and alpha["tools"].total_ms == 30_226
    beta = by_key(found)["Beta"].phases
    assert beta["planning"].p50_ms == 1000 and beta["execution"].p50_ms == 2000  # the solver
    assert "tools" not in beta
    # Over all groups, planning took 100, 300 and 1000 ms: neither group's own p50 (100, 1000).
    overall = found.phases["planning"]
    assert (overall.calls, overall.p50_ms, overall.p95_ms, overall.total_ms) == (3, 300, 1000,
                                                                                 1400)
    assert found.phases["tools"].calls == 7 and found.phases["tools"].p50_ms == 5


def test_tool_success_rate_and_most_common_errors(runs, user):
    tools = {t.name: t for t in figures(user, period(period="30d")).tools}
    assert set(tools) == {"calculator", "get_weather", "read_file"}
    calc = tools["calculator"]
    assert (calc.calls, calc.ok, calc.errors, calc.success_rate) == (4, 2, 2, 0.5)
    assert calc.top_errors == [("validation", 2, "Error: invalid arguments for calculator: "
                                                  "expression is required")]
    assert tools["get_weather"].success_rate == 0.5
    assert tools["get_weather"].top_errors[0][:2] == ("timeout", 1)
    # No error_type recorded: the error is the first line of the step's text.
    assert tools["read_file"].top_errors == [("(error: no such file)", 1, "(error: no such file)")]


def test_alice_never_sees_bobs_runs_and_staff_sees_everyone(runs, user, staff):
    alice = figures(user, period(period="all"))
    assert by_key(alice)["Alpha"].runs == 5  # four this month, one 40 days ago; not Bob's
    assert by_key(alice)["Alpha"].p95["steps"] == 50
    assert all(t.name != "calculator" or t.errors == 2 for t in alice.tools)
    everyone = figures(staff, period(period="all"))
    assert by_key(everyone)["Alpha"].runs == 6 and by_key(everyone)["Alpha"].p95["steps"] == 100
    calc = {t.name: t for t in everyone.tools}["calculator"]
    assert calc.errors == 3 and calc.top_errors[1][:2] == ("exception", 1)


def test_periods_group_by_and_dates(runs, user):
    assert figures(user, period(period="all")).runs == 7
    assert figures(user, period(period="24h")).runs == 6
    today = timezone.localdate()
    old = (today - timedelta(days=40)).isoformat()
    assert figures(user, period(date_from=old, date_to=old)).runs == 1
    groups = by_key(figures(user, period(period="7d", group="model")))
    assert set(groups) == {"m-small", "m-big"} and groups["m-big"].runs == 2
    assert groups["m-big"].phases["planning"].p50_ms == 1000  # steps grouped by their run's model
    assert groups["m-small"].phases["tools"].calls == 7
    assert set(by_key(figures(user, period(group="paradigm")))) == {"react", "plan_execute"}
    profiles = by_key(figures(user, period(period="7d", group="profile")))
    assert set(profiles) == {"m-small profile", "m-big profile"}
    assert profiles["m-big profile"].runs == 2
    # Bad input falls back to the defaults (7 days, by agent) and says why on the page.
    assert period(period="1y", group="colour").key == "7d"


def test_the_number_of_queries_does_not_grow_with_runs_or_groups(runs, user, client):
    client.force_login(user)
    client.get("/dashboard/")  # a process's first request also sweeps what stopped ones left
    with CaptureQueriesContext(connection) as few:
        client.get("/dashboard/")
    for i in range(6):
        run_with_totals(user, agent=f"Agent {i}", steps=i)
    with CaptureQueriesContext(connection) as many:
        assert client.get("/dashboard/").status_code == 200
    assert len(many) == len(few) <= 20


def test_the_page_shows_charts_tables_and_links_to_the_runs_behind_them(runs, user, client):
    client.force_login(user)
    day = timezone.localdate().isoformat()
    html = client.get(f"/dashboard/?date_from={day}&date_to={day}").content.decode()
    assert "chart.umd.min.js" in html and 'id="chart-outcomes"' in html
    assert 'id="chart-latency"' in html and 'id="chart-tools"' in html
    failed = re.search(r'<td class="num" data-col="failed"><a href="([^"]+)">1</a>', html)
    assert failed, html
    url = unescape(failed.group(1))
    assert url == f"/runs/?from={day}&to={day}&agent=Alpha&status=failed"
    # The link opens exactly the run behind the figure.
    listing = client.get(url).content.decode()
    assert re.findall(r'<tr data-run="(\d+)"', listing) == [str(runs["r2"].pk)]
    assert ">50%</a>" in html  # Alpha's completion rate, linked to its succeeded runs
    data = json.loads(re.search(r'<script id="dashboard-data" type="application/json">(.*?)'
                                r"</script>", html, re.S).group(1))
    assert data["outcomes"]["labels"] == ["Alpha", "Beta"]
    succeeded = next(s for s in data["outcomes"]["series"] if s["key"] == "succeeded")
    assert succeeded["data"] == [2, 1]
    assert data["latency"]["labels"] == ["planning", "execution", "reflection", "tools"]
    assert data["tools"]["success_pct"][data["tools"]["labels"].index("calculator")] == 50.0
    assert "validation" in html and "×2" in html
    assert "exception" not in html  # Bob's tool error


def section(html, name):
    return html.split(f'<section class="card" id="{name}">', 1)[1].split("</section>", 1)[0]


def row(html, name, key, attr="group"):
    return re.search(rf'<tr data-{attr}="{key}">(.*?)</tr>', section(html, name), re.S).group(1)


def cell_link(row_html, col=None):
    """The link of a row's cell (`col`: its data-col) or, without `col`, of its first cell."""
    where = rf'data-col="{col}"[^>]*>' if col else r"<td>"
    return unescape(re.search(rf'{where}<a href="([^"]+)"', row_html).group(1))


def listed(client, url):
    response = client.get(url)
    assert response.status_code == 200 and b"filter-note" not in response.content, url
    return {int(pk) for pk in re.findall(r'<tr data-run="(\d+)"', response.content.decode())}


def test_every_link_lists_exactly_the_runs_its_figure_counts(runs, user, client):
    r1, r2, r3, r4, b1 = (runs[k] for k in ("r1", "r2", "r3", "r4", "b1"))
    r5 = run_with_totals(user, steps=5)  # succeeded without reflecting: not in "…then succeeded"
    cancelled = Run.objects.get(user=user, status="cancelled")
    # Just outside "last 24 h": a whole-day link would list it, the exact instant does not.
    stale = run_with_totals(user, steps=7)
    Run.objects.filter(pk=stale.pk).update(created=timezone.now() - timedelta(hours=24,
                                                                              minutes=1))
    # In progress, with a calculator call: neither counted nor listed.
    add_steps(Run.objects.get(user=user, status="running"), tool("calculator"))
    client.force_login(user)
    html = client.get("/dashboard/?period=24h").content.decode()
    alpha = {r1.pk, r2.pk, r3.pk, r4.pk, r5.pk}
    header = unescape(re.search(r'<a href="([^"]+)">7 finished runs</a>', html).group(1))
    assert re.search(r"from=\d{4}-\d\d-\d\dT\d\d%3A\d\d%3A\d\d", header), header
    assert listed(client, header) == alpha | {b1.pk, cancelled.pk}
    outcomes = row(html, "outcomes", "Alpha")
    assert re.search(r'<td class="num"><a href="[^"]+">5</a></td>', outcomes)
    assert listed(client, cell_link(outcomes)) == alpha
    assert listed(client, cell_link(outcomes, "failed")) == {r2.pk}
    assert listed(client, cell_link(outcomes, "timed_out")) == {r4.pk}
    assert listed(client, cell_link(outcomes, "completion")) == {r1.pk, r3.pk, r5.pk}
    assert listed(client, cell_link(row(html, "work", "Alpha"))) == alpha
    quality = row(html, "quality", "Alpha")
    assert listed(client, cell_link(quality, "format_runs")) == {r2.pk, r3.pk}  # 2 of 5
    assert listed(client, cell_link(quality, "format_per_call")) == {r2.pk, r3.pk}
    assert listed(client, cell_link(quality, "reflection_rate")) == {r1.pk, r2.pk, r3.pk}
    assert ">67%</a>" in quality  # r1 and r3 of the three that reflected
    assert listed(client, cell_link(quality, "reflection_success")) == {r1.pk, r3.pk}
    expected = {"calculator": ({r1.pk, r2.pk}, {r1.pk}, {r2.pk}),
                "get_weather": ({r2.pk, r3.pk}, {r3.pk}, {r2.pk}),
                "read_file": ({r3.pk}, None, {r3.pk})}
    for name, (called, ok, failed) in expected.items():
        tool_row = row(html, "tools", name, attr="tool")
        assert listed(client, cell_link(tool_row)) == called
        assert listed(client, cell_link(tool_row, "calls")) == called
        assert listed(client, cell_link(tool_row, "errors")) == failed
        if ok:
            assert listed(client, cell_link(tool_row, "ok")) == ok
        else:
            assert 'data-col="ok">0</td>' in tool_row
    data = json.loads(re.search(r'<script id="dashboard-data" type="application/json">(.*?)'
                                r"</script>", html, re.S).group(1))
    failed = next(s for s in data["outcomes"]["series"] if s["key"] == "failed")
    assert listed(client, failed["links"][0]) == {r2.pk}
    assert listed(client, data["usage"]["links"][0]) == alpha
    assert listed(client, data["latency"]["links"][0]) == alpha | {b1.pk, cancelled.pk}
    tools = dict(zip(data["tools"]["labels"], data["tools"]["links"], strict=True))
    assert listed(client, tools["calculator"]) == {r1.pk, r2.pk}
    assert "approximate" not in html and "whole days" not in html


def test_links_by_model_and_for_chosen_dates_are_exact_too(runs, user, client):
    client.force_login(user)
    day = timezone.localdate().isoformat()
    html = client.get(f"/dashboard/?date_from={day}&date_to={day}&group=model").content.decode()
    big = row(html, "outcomes", "m-big")
    assert cell_link(big).startswith(f"/runs/?from={day}&to={day}&model=m-big")
    cancelled = Run.objects.get(user=user, status="cancelled")
    assert listed(client, cell_link(big)) == {runs["b1"].pk, cancelled.pk}
    assert listed(client, cell_link(big, "cancelled")) == {cancelled.pk}
    html = client.get(f"/dashboard/?date_from={day}&date_to={day}&group=profile").content.decode()
    by_profile = row(html, "outcomes", "m-big profile")
    assert cell_link(by_profile).startswith(
        f"/runs/?from={day}&to={day}&profile=m-big+profile")
    assert listed(client, cell_link(by_profile)) == {runs["b1"].pk, cancelled.pk}


def test_the_page_renders_with_no_runs_and_needs_a_login(user, client):
    assert client.get("/dashboard/").status_code == 302
    client.force_login(user)
    response = client.get("/dashboard/?period=all")
    assert response.status_code == 200
    assert "No finished runs all time" in response.content.decode()
    assert b"dashboard-data" not in response.content


def test_a_form_error_is_shown_and_the_defaults_are_used(user, client):
    client.force_login(user)
    html = client.get("/dashboard/?date_from=2025-02-01&date_to=2025-01-01").content.decode()
    assert "is after" in html and "showing the default period" in html


def test_nearest_rank_percentiles_handle_one_value_ties_and_100(user):
    for steps, llm in ((5, 1), (5, 2), (5, 3), (9, 4)):
        run_with_totals(user, steps=steps, llm=llm)
    rows = Run.objects.all()
    found = percentiles(rows, [], ["step_count", "llm_calls"], (50, 75, 76, 100))[()]
    assert [found["step_count", p] for p in (50, 75, 76, 100)] == [5, 5, 9, 9]
    assert [found["llm_calls", p] for p in (50, 75, 76, 100)] == [2, 3, 4, 4]
    assert found["n"] == 4 and found["step_count", "sum"] == 24
    one = percentiles(rows.filter(step_count=9), ["agent_name"], ["step_count"], (1, 95))
    assert one == {("Alpha",): {"n": 1, ("step_count", "sum"): 9, ("step_count", 1): 9,
                                ("step_count", 95): 9}}
    assert percentiles(rows.none(), [], ["step_count"], (50,)) == {}
    with pytest.raises(ValueError, match="between 1 and 100"):
        percentiles(rows, [], ["step_count"], (0,))


def test_an_mcp_servers_tool_is_a_tool_and_an_invented_name_is_not(user, client):
    # MCP tools exist as Tool rows only (not in the code registry); the dashboard must not call
    # them made up.
    Tool.objects.create(name="mcp__clock__now", category="mcp")
    run = run_with_totals(user, agent="Clocky")
    add_steps(run, tool("mcp__clock__now"), tool("magic_wand", ok=False, text="unknown tool"))
    client.force_login(user)
    html = client.get("/dashboard/").content.decode()
    data = json.loads(re.search(r'<script id="dashboard-data" type="application/json">(.*?)'
                                r"</script>", html, re.S).group(1))
    assert sorted(data["tools"]["labels"]) == ["mcp__clock__now", "unknown tool magic_wand"]
