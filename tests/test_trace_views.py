"""The trace viewer's pages through Django's test client on a real database: runs list (search,
filters, sort, pagination), one run (tree, node meta, payloads, load more, messages), diff,
export/import, and that another user's run is a 404 everywhere.

`make_run` and `demo_steps` (tests/factories.py) build recorded runs directly (no model
involved)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from tests.factories import T0, big_run, demo_steps, make_run
from traces import startup
from traces.models import Run, Step

pytestmark = pytest.mark.django_db

def html(response) -> str:
    assert response.status_code == 200, response.status_code
    return response.content.decode()


# ---------------------------------------------------------------------------- runs list


@pytest.fixture
def three_runs(user, other_user):
    paris = make_run(user)
    math = make_run(user, [{"kind": "tool", "name": "calculator", "input": {"e": "6*7"},
                            "text": "42"}, {"kind": "final", "text": "42"}],
                    input="What is 6*7?", agent_name="Calc agent", paradigm="rewoo",
                    status="failed", error="boom", cost_usd=0.5, wall_ms=99_000.0,
                    agent_snapshot={"profiles": {"default": {"name": "Big", "model": "gpt-x"}}})
    theirs = make_run(other_user, input="Bob's secret question")
    return paris, math, theirs


def row_ids(response) -> list[int]:
    return [r.pk for r in response.context["page"].object_list]


def test_the_list_shows_only_my_runs_and_staff_see_all(client, user, staff, three_runs):
    paris, math, theirs = three_runs
    client.force_login(user)
    page = html(client.get(reverse("runs")))
    assert "What is 6*7?" in page and "Bob&#x27;s secret question" not in page
    assert set(row_ids(client.get(reverse("runs")))) == {paris.pk, math.pk}
    client.force_login(staff)
    response = client.get(reverse("runs"))
    assert set(row_ids(response)) == {paris.pk, math.pk, theirs.pk}
    assert "bob" in html(response)  # staff see the user column


def test_anonymous_visitors_are_sent_to_log_in(client):
    response = client.get(reverse("runs"))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize(("query", "expected"), [
    ({"q": "calculator"}, "math"),  # a tool name, through the steps
    ({"q": "sunny in paris"}, "paris"),  # the answer
    ({"q": "6*7"}, "math"),  # the question
    ({"agent": "Calc agent"}, "math"),
    ({"paradigm": "react"}, "paris"),
    ({"model": "gpt-x"}, "math"),
    ({"status": "failed"}, "math"),
])
def test_search_and_filters(client, user, three_runs, query, expected):
    paris, math, _ = three_runs
    client.force_login(user)
    assert row_ids(client.get(reverse("runs"), query)) == [{"paris": paris,
                                                             "math": math}[expected].pk]


def test_date_filters_and_a_user_filter_only_for_staff(client, user, staff, three_runs):
    paris, math, theirs = three_runs
    Run.objects.filter(pk=paris.pk).update(created=T0 - timedelta(days=10))
    client.force_login(user)
    day = (T0 - timedelta(days=10)).date().isoformat()
    assert row_ids(client.get(reverse("runs"), {"to": day})) == [paris.pk]  # the whole day
    assert paris.pk not in row_ids(client.get(reverse("runs"), {"from": T0.date()}))
    # Older links' names still work.
    assert row_ids(client.get(reverse("runs"), {"date_to": day})) == [paris.pk]
    # A non-staff user's "user" parameter is ignored: still only their own runs.
    assert set(row_ids(client.get(reverse("runs"), {"user": "bob"}))) == {paris.pk, math.pk}
    client.force_login(staff)
    assert row_ids(client.get(reverse("runs"), {"user": "bob"})) == [theirs.pk]


def test_sorting_uses_whitelisted_keys_only(client, user, three_runs):
    paris, math, _ = three_runs
    client.force_login(user)
    assert row_ids(client.get(reverse("runs"), {"sort": "-cost"})) == [math.pk, paris.pk]
    assert row_ids(client.get(reverse("runs"), {"sort": "steps"})) == [math.pk, paris.pk]
    assert row_ids(client.get(reverse("runs"), {"sort": "-steps"})) == [paris.pk, math.pk]
    assert row_ids(client.get(reverse("runs"), {"sort": "duration"})) == [paris.pk, math.pk]
    # An unknown key falls back to newest first instead of naming a column.
    response = client.get(reverse("runs"), {"sort": "-user__password"})
    assert row_ids(response) == [math.pk, paris.pk]
    page = html(client.get(reverse("runs"), {"sort": "-cost", "status": "failed"}))
    assert "sort=cost&amp;status=failed" in page  # the header flips, the filter stays


def test_pagination_keeps_the_filters(client, user):
    for i in range(55):
        Run.objects.create(user=user, input=f"question {i}", paradigm="react", status="failed")
    Run.objects.create(user=user, input="not failed", status="succeeded")
    client.force_login(user)
    first = client.get(reverse("runs"), {"status": "failed"})
    assert len(row_ids(first)) == 50 and "page 1 of 2" in html(first)
    assert "status=failed&amp;page=2" in html(first)
    second = client.get(reverse("runs"), {"status": "failed", "page": 2})
    assert len(row_ids(second)) == 5 and "not failed" not in html(second)


def test_htmx_requests_get_only_the_table(client, user, three_runs):
    client.force_login(user)
    response = client.get(reverse("runs"), {"q": "calculator"}, headers={
        "HX-Request": "true", "HX-Target": "run-table"})
    body = html(response)
    assert body.lstrip().startswith('<div id="run-table"') and "<html" not in body
    assert "What is 6*7?" in body and "Paris?" not in body


def test_the_list_stays_a_few_queries_however_many_runs(client, user,
                                                       django_assert_max_num_queries):
    for i in range(120):
        Run.objects.create(user=user, input=f"q{i}", agent_name=f"agent {i % 3}")
    client.force_login(user)
    startup.sweep_once()  # a process's first request sweeps (traces.startup): not the list's
    # 13: the session, the user, a filter's choices each (agent, paradigm, model, profile,
    # project, feedback keys), the count, the page, the suites "Add to suite" offers
    with django_assert_max_num_queries(13):
        assert len(row_ids(client.get(reverse("runs"), {"q": "q1"}))) == 31
    Step.objects.bulk_create(Step(run=run, seq=1, kind="tool", name="calculator", status="error",
                                  started_at=T0) for run in Run.objects.all())
    every_filter = {"q": "q1", "from": "2000-01-01T00:00", "to": "2999-01-01", "tool":
                    "calculator", "tool_status": "error", "status": "finished",
                    "format_errors": "1", "reflections": "1", "profile": "x"}
    Run.objects.update(format_errors=1, reflections=1, status="failed",
                       agent_snapshot={"profiles": {"default": {"name": "x"}}})
    with django_assert_max_num_queries(14):
        assert len(row_ids(client.get(reverse("runs"), every_filter))) == 31


def at(run: Run, moment: datetime) -> Run:
    Run.objects.filter(pk=run.pk).update(created=moment)
    return run


def test_from_and_to_take_a_date_or_an_exact_time(client, user):
    """TIME_ZONE is UTC: a time without offset is UTC, one with an offset is that instant."""
    early = at(make_run(user, input="early"), datetime(2026, 12, 3, 7, 59, 59, tzinfo=UTC))
    on_time = at(make_run(user, input="on time"), datetime(2026, 12, 3, 8, 0, tzinfo=UTC))
    late = at(make_run(user, input="late"), datetime(2026, 12, 3, 23, 59, 59, 999_000,
                                                        tzinfo=UTC))
    next_day = at(make_run(user, input="next day"), datetime(2026, 12, 4, 0, 0, tzinfo=UTC))
    client.force_login(user)

    def ids(**query: str) -> set[int]:
        return set(row_ids(client.get(reverse("runs"), query)))

    assert ids(**{"from": "2026-12-03T08:00"}) == {on_time.pk, late.pk, next_day.pk}
    assert ids(**{"from": "2026-12-03T09:00+01:00"}) == {on_time.pk, late.pk, next_day.pk}
    assert ids(to="2026-12-03T08:00:00") == {early.pk, on_time.pk}  # inclusive
    assert ids(**{"from": "2026-12-03", "to": "2026-12-03"}) == {early.pk, on_time.pk, late.pk}
    assert ids(**{"from": "2026-12-03 07:59:59", "to": "2026-12-03T08:00"}) == {
        early.pk, on_time.pk}
    page = html(client.get(reverse("runs"), {"from": "2026-12-03T08:00", "page": 1}))
    assert 'name="from" value="2026-12-03T08:00"' in page  # the form shows the filter


def test_profile_format_error_and_reflection_filters(client, user, three_runs):
    paris, math, _ = three_runs
    clumsy = make_run(user, format_errors=2, agent_snapshot={
        "profiles": {"default": {"name": "Big", "model": "gpt-y"}}})
    thinker = make_run(user, reflections=1, format_errors=0)
    client.force_login(user)

    def ids(**query: str) -> list[int]:
        return row_ids(client.get(reverse("runs"), query))

    assert ids(profile="Big") == [clumsy.pk, math.pk]  # two models, one profile name
    assert ids(profile="Scripted") == [thinker.pk, paris.pk]
    assert ids(format_errors="1") == [clumsy.pk]
    assert ids(reflections="1") == [thinker.pk]
    assert ids(reflections="1", profile="Big") == []
    page = html(client.get(reverse("runs"), {"format_errors": "1"}))
    assert 'name="format_errors" value="1" checked' in page
    assert '<option value="Big">Big</option>' in page


def calls(*specs: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"kind": "tool", "name": name, "status": status, "text": status}
            for name, status in specs] + [{"kind": "final", "text": "done"}]


def test_the_tool_filter_finds_runs_that_called_a_tool_once_each(client, user):
    twice = make_run(user, calls(("calculator", "ok"), ("calculator", "ok"),
                                 ("calculator", "error")))
    failed = make_run(user, calls(("calculator", "error"), ("get_weather", "ok")))
    weather = make_run(user, calls(("get_weather", "ok")))
    # A ReWOO worker reusing an earlier result made no call (the dashboard does not count it).
    reused = make_run(user, [{"kind": "tool", "name": "calculator", "status": "ok",
                              "meta": {"reused": "#E1"}}])
    client.force_login(user)

    def ids(**query: str) -> list[int]:
        return row_ids(client.get(reverse("runs"), query))

    assert ids(tool="calculator") == [failed.pk, twice.pk]  # once each, no join duplicates
    assert ids(tool="calculator", tool_status="ok") == [twice.pk]
    assert ids(tool="calculator", tool_status="error") == [failed.pk, twice.pk]
    assert ids(tool="get_weather", tool_status="error") == []
    assert ids(tool_status="error") == [failed.pk, twice.pk]
    assert ids(tool="get_weather") == [weather.pk, failed.pk]
    assert reused.pk not in ids(tool="calculator")
    first = client.get(reverse("runs"), {"tool": "calculator", "tool_status": "error"})
    assert first.context["page"].paginator.count == 2  # the count too: no duplicate rows


def test_bad_filter_values_are_ignored_with_a_note(client, user, three_runs):
    paris, math, _ = three_runs
    client.force_login(user)
    response = client.get(reverse("runs"), {
        "from": "yesterday", "to": "2026-13-45", "tool_status": "maybe", "format_errors": "yes",
        "reflections": "2", "profile": "<b>nobody</b>", "status": "finished"})
    page = html(response)
    assert set(row_ids(response)) == {paris.pk, math.pk}  # only the valid filter applies
    note = page.split('class="error filter-note"', 1)[1].split("</p>", 1)[0]
    assert "From: “yesterday” is not a date" in note and "To: “2026-13-45”" in note
    for field in ("Tool result", "Format errors", "Reflections", "Profile"):
        assert f"{field}: Select a valid choice." in note
    assert "&lt;b&gt;nobody&lt;/b&gt;" in note and "<b>nobody" not in page
    assert "filter-note" not in html(client.get(reverse("runs"), {"status": "finished"}))


def test_sort_and_pager_links_keep_the_new_filters(client, user):
    for i in range(55):
        make_run(user, calls(("calculator", "error")), input=f"question {i}", reflections=1,
                 format_errors=1)
    make_run(user, calls(("calculator", "ok")), input="only ok", reflections=1,
             format_errors=1)
    client.force_login(user)
    query = {"from": "2025-03-01T00:00", "tool": "calculator", "tool_status": "error",
             "format_errors": "1", "reflections": "1", "profile": "Scripted"}
    page = html(client.get(reverse("runs"), query))
    kept = ("from=2025-03-01T00%3A00&amp;tool=calculator&amp;tool_status=error&amp;"
            "format_errors=1&amp;reflections=1&amp;profile=Scripted")
    # One "?" (Django 6's querystring tag writes it): "??from=" would rename the first filter.
    assert f'href="?{kept}&amp;page=2"' in page and f'href="?{kept}&amp;sort=-cost"' in page
    second = client.get(reverse("runs"), {**query, "page": 2})
    assert len(row_ids(second)) == 5 and "only ok" not in html(second)


# ---------------------------------------------------------------------------- one run


def test_the_run_page_shows_the_header_the_tree_and_the_steps(client, user):
    run = make_run(user, error="", format_errors=1, reflections=0)
    client.force_login(user)
    page = html(client.get(reverse("run", args=[run.pk])))
    assert "What is the weather in Paris?" in page and "It is sunny in Paris." in page
    assert "Weather agent" in page and "ReAct" in page and "<code>scripted-model</code>" in page
    # The plan's llm call and tool sit one level deeper than the plan.
    assert 'id="step-1" data-seq="1" data-kind="plan" data-depth="0"' in page
    assert 'id="step-2" data-seq="2" data-kind="llm" data-depth="1"' in page
    assert 'id="step-3" data-seq="3" data-kind="tool" data-depth="1"' in page
    # LATS node value/visits, the team member's role, the action and its arguments.
    assert '<li class="fact-value"><span>value</span> 0.75</li>' in page
    assert '<li class="fact-visits"><span>visits</span> 3</li>' in page
    assert '<span class="role" title="role">researcher</span>' in page
    assert "<code>get_weather</code>" in page and "Observation" in page
    # JSON and SQL are highlighted by Pygments (token spans), the waterfall has a bar per step.
    assert '<span class="nt">"city"</span>' in page
    assert '<span class="k">SELECT</span>' in page
    assert page.count('class="bar k-') == 8
    assert "Export bundle" in page and reverse("run_export_otlp", args=[run.pk]) in page


def test_a_failed_run_shows_why_and_a_fork_links_its_origin(client, user):
    origin = make_run(user)
    fork = make_run(user, status="failed", error="cannot reach http://127.0.0.1:9/v1",
                    parent_run=origin, fork_seq=3)
    client.force_login(user)
    page = html(client.get(reverse("run", args=[fork.pk])))
    assert "Why it failed" in page and "cannot reach http://127.0.0.1:9/v1" in page
    assert f'href="{reverse("run", args=[origin.pk])}?step=3">run {origin.pk}</a> at step 3' \
        in page
    assert f"run {fork.pk}</a> (fork from step 3)" in html(client.get(reverse("run",
                                                                        args=[origin.pk])))


def test_long_payloads_are_collapsed_with_their_size_and_fetched_on_demand(client, user):
    run = make_run(user)
    client.force_login(user)
    page = html(client.get(reverse("run", args=[run.pk])))
    assert "END-OF-LONG-PAYLOAD" not in page
    url = reverse("step_payload", args=[run.pk, 6, "text"])
    assert f'hx-get="{url}"' in page and "Observation · 5.0 KB" in page
    assert f'hx-get="{reverse("step_payload", args=[run.pk, 6, "output"])}"' in page
    body = html(client.get(url))
    assert "END-OF-LONG-PAYLOAD" in body and body.startswith('<div class="hl">')
    output = html(client.get(reverse("step_payload", args=[run.pk, 6, "output"])))
    assert "END-OF-LONG-PAYLOAD" in output and '<span class="nt">"ok"</span>' in output
    assert client.get(reverse("step_payload", args=[run.pk, 6, "meta"])).status_code == 404
    assert client.get(reverse("step_payload", args=[run.pk, 99, "input"])).status_code == 404


def test_payloads_are_escaped(client, user):
    run = make_run(user, [{"kind": "tool", "name": "x", "input": {"q": "<script>alert(1)"},
                           "text": "<img src=x onerror=alert(1)>"}])
    client.force_login(user)
    page = html(client.get(reverse("run", args=[run.pk])))
    assert "<script>alert(1)" not in page and "<img src=x" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_every_field_of_a_step_header_is_escaped(client, user):
    """The step partial is built in Python (traces/display/html.py): names, roles, statuses, facts
    and replay marks a model or tool chose must reach the page as text, never as markup."""
    evil = "<img src=x onerror=alert(1)>"
    run = make_run(user, [{"kind": "llm", "role": evil, "name": evil, "text": evil,
                           "meta": {evil: evil, "divergence": evil, "replayed": True,
                                    "source_seq": evil},
                           "output": {"text": "", "tool_calls": [{"id": "c", "name": evil,
                                                                  "arguments": {}}]}}])
    client.force_login(user)
    page = html(client.get(reverse("run", args=[run.pk])))
    assert "<img src=x" not in page and page.count("&lt;img src=x onerror=alert(1)&gt;") >= 5


def test_the_messages_panel_shows_the_conversation_the_model_saw(client, user):
    run = make_run(user)
    client.force_login(user)
    page = html(client.get(reverse("run", args=[run.pk])))
    url = reverse("step_messages", args=[run.pk, 2])
    assert f'hx-get="{url}"' in page
    body = html(client.get(url))
    assert '<span class="msg-role">system</span>' in body and "You are a careful agent." in body
    assert "What is the weather in Paris?" in body and "<code>get_weather</code>" in body
    # Only llm steps have messages.
    assert client.get(reverse("step_messages", args=[run.pk, 3])).status_code == 404


def test_a_big_run_renders_its_first_page_and_loads_more(client, user,
                                                        django_assert_max_num_queries):
    run = big_run(user, 450)
    client.force_login(user)
    # 17: none per step; two are evals' (the cases made from the run, the suites it may go
    # to), one the feedback's (the run's and its steps' at once)
    with django_assert_max_num_queries(17):
        page = html(client.get(reverse("run", args=[run.pk])))
    assert 'id="step-200"' in page and 'id="step-201"' not in page
    more = f'{reverse("run_steps", args=[run.pk])}?after=200'
    assert f'hx-get="{more}" hx-trigger="revealed"' in page
    assert 'max="450"' in page  # the slider spans every step
    second = html(client.get(more, headers={"HX-Request": "true"}))
    assert 'id="step-201"' in second and 'id="step-400"' in second
    assert 'id="step-401"' not in second and "?after=400" in second
    # Steps whose parent is on an earlier page still know their depth.
    assert 'data-seq="300" data-kind="thought" data-depth="1"' in second
    last = html(client.get(f"{reverse('run_steps', args=[run.pk])}?after=400"))
    assert 'id="step-450"' in last and "steps-more" not in last


def test_a_link_to_a_step_renders_up_to_it_and_marks_it(client, user):
    run = big_run(user, 450)
    client.force_login(user)
    page = html(client.get(reverse("run", args=[run.pk]), {"step": 330}))
    assert 'id="step-330"' in page and 'data-current="330"' in page
    upto = html(client.get(reverse("run_steps", args=[run.pk]), {"after": 200, "upto": 420}))
    assert 'id="step-420"' in upto


def test_a_huge_run_shows_its_slowest_steps_in_the_timeline(client, user):
    steps = [{"kind": "tool" if i % 2 else "llm", "name": "t", "duration_ms": float(i)}
             for i in range(1, 601)]
    run = make_run(user, steps)
    client.force_login(user)
    page = html(client.get(reverse("run", args=[run.pk])))
    assert page.count('class="bar k-') == 300 and "the 300 slowest of 600 steps" in page
    assert 'data-go="600"' in page and 'href="?step=2" data-go="2"' not in page.split(
        'class="card trace"')[0]


# ---------------------------------------------------------------------------- diff


def test_the_diff_page_marks_the_first_divergence_and_sums_up(client, user):
    a = make_run(user)
    changed = demo_steps()
    changed[2] = {**changed[2], "text": "Rainy, 12 C"}
    changed[-1] = {"kind": "final", "text": "It is rainy in Paris."}
    b = make_run(user, changed)
    client.force_login(user)
    page = html(client.get(reverse("run_diff"), {"a": a.pk, "b": b.pk}))
    assert "Different answers" in page and "It is rainy in Paris." in page
    assert '<a href="#first-divergence" class="jump">Jump to first divergence</a>' in page
    row = page.split('id="first-divergence"')[1].split("</tr>")[0]
    assert "get_weather" in row and "<del>Sunny</del>" in row and "<ins>Rainy</ins>" in row
    assert page.count('class="op-changed') == 2
    same = html(client.get(reverse("run_diff"), {"run": [a.pk, a.pk]}))
    assert "Same answer" in same and "do not diverge" in same


def test_the_diff_needs_two_visible_runs(client, user, other_user):
    mine, theirs = make_run(user), make_run(other_user)
    client.force_login(user)
    assert client.get(reverse("run_diff"), {"a": mine.pk, "b": theirs.pk}).status_code == 404
    assert client.get(reverse("run_diff"), {"a": mine.pk}).status_code == 404
    assert client.get(reverse("run_diff"), {"a": "x", "b": "y"}).status_code == 404


# ---------------------------------------------------------------------------- export, import


def test_export_downloads_a_bundle_and_otlp(client, user):
    run = make_run(user)
    client.force_login(user)
    response = client.get(reverse("run_export", args=[run.pk]))
    assert response["Content-Disposition"] == f'attachment; filename="agentlab-run-{run.pk}.json"'
    bundle = json.loads(response.content)
    assert len(bundle["steps"]) == 8
    otlp = client.get(reverse("run_export_otlp", args=[run.pk]))
    assert "resourceSpans" in json.loads(otlp.content)


def test_an_imported_bundle_opens_as_a_new_run(client, user):
    run = make_run(user)
    client.force_login(user)
    data = client.get(reverse("run_export", args=[run.pk])).content
    upload = SimpleUploadedFile("run.json", data, content_type="application/json")
    response = client.post(reverse("run_import"), {"bundle": upload}, follow=True)
    new = Run.objects.exclude(pk=run.pk).get()
    assert response.redirect_chain[-1][0] == reverse("run", args=[new.pk])
    assert "It is sunny in Paris." in html(response) and new.steps.count() == 8


@pytest.mark.parametrize(("content", "reason"), [
    (b'{"format": "agentlab.run-bundle", ', "not valid JSON"),
    (b'{"format": "agentlab.run-bundle", "version": 99}', "version"),
    (b"[1, 2]", "refused"),
])
def test_a_bad_bundle_is_refused_with_the_reason(client, user, content, reason):
    client.force_login(user)
    upload = SimpleUploadedFile("bad.json", content, content_type="application/json")
    response = client.post(reverse("run_import"), {"bundle": upload}, follow=True)
    page = html(response)
    assert response.redirect_chain[-1][0] == reverse("runs")
    assert "Import: bad.json was refused:" in page and reason in page
    assert Run.objects.count() == 0


# ---------------------------------------------------------------------------- highlighting


def test_the_committed_pygments_stylesheet_is_current():
    from traces.display.highlight import stylesheet

    css = (settings.BASE_DIR / "static/agentlab/pygments.css").read_text()
    assert css == stylesheet(), (
        "run: python -m traces.display.highlight > static/agentlab/pygments.css")
    light, dark = css.split("@media (prefers-color-scheme: dark)")
    assert ".hl .k {" in light and ".hl .k {" in dark


def test_the_highlight_filters_escape_and_pick_a_lexer():
    from django.template import Context, Template

    out = Template('{% load trace_tags %}{{ sql|highlight:"sql" }}|{{ data|highlight }}|'
                   '{{ raw|highlight }}').render(Context({
                       "sql": "SELECT 1", "data": {"a": "<b>"}, "raw": "<i>plain</i>"}))
    assert '<span class="k">SELECT</span>' in out and "&lt;b&gt;" in out
    assert "&lt;i&gt;plain&lt;/i&gt;" in out and "<b>" not in out


# ---------------------------------------------------------------------------- permissions


@pytest.mark.parametrize(("name", "args"), [
    ("run", []), ("run_steps", []), ("step_payload", [6, "text"]), ("step_messages", [2]),
    ("run_export", []), ("run_export_otlp", []),
])
def test_another_users_run_is_a_404_everywhere(client, user, other_user, staff, name, args):
    theirs = make_run(other_user)
    client.force_login(user)
    assert client.get(reverse(name, args=[theirs.pk, *args])).status_code == 404
    client.force_login(staff)
    assert client.get(reverse(name, args=[theirs.pk, *args])).status_code == 200
