"""The run page of a long run (issue 37): what it reads does not grow with the run.

A link far into a run opens a page of steps around it (and loads earlier ones on demand); the
replay's far jumps get the same page; search within the run reads a bounded range of steps; a
long run's timeline is a stored aggregate of buckets, summed once and then only for new steps.
The thresholds are lowered here so that runs of hundreds of steps take those paths.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from tests.factories import T0, big_run, make_run
from traces import timeline_summary
from traces.models import RunTimeline, Step
from traces.views import find

pytestmark = pytest.mark.django_db


def html(response) -> str:
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def test_a_link_far_into_a_run_opens_a_page_around_the_step(client, user,
                                                           django_assert_max_num_queries):
    run = big_run(user, 900)
    client.force_login(user)
    client.get(reverse("run", args=[run.pk]))  # the process's first request: startup checks
    # the first page's budget (test_trace_views) and four: the parent (#1) outside the page,
    # whether steps come before it, and the steps it is inside (two); none per step, none
    # over the whole run
    with django_assert_max_num_queries(21):
        page = html(client.get(reverse("run", args=[run.pk]), {"step": 700}))
    assert 'id="step-670"' in page and 'id="step-729"' in page and 'data-current="700"' in page
    assert 'id="step-669"' not in page and 'id="step-2"' not in page
    assert "Load earlier steps (before #670)" in page and "?after=729" in page
    assert 'Inside <a href="?step=1" data-go="1">#1 thought</a>' in page
    assert 'data-seq="700" data-kind="thought" data-depth="1"' in page  # its parent is #1
    earlier = html(client.get(reverse("run_steps", args=[run.pk]), {"before": 670}))
    assert 'id="step-470"' in earlier and 'id="step-669"' in earlier
    assert 'id="step-469"' not in earlier and "before #470" in earlier
    assert "steps-more" not in earlier.split("before #470")[1]  # put before: no "load more"
    first = html(client.get(reverse("run_steps", args=[run.pk]), {"before": 150}))
    assert 'id="step-1"' in first and "Load earlier" not in first
    # the replay's far jump gets the same page as the link
    around = html(client.get(reverse("run_steps", args=[run.pk]), {"around": 700}))
    assert 'id="step-670"' in around and "before #670" in around and "?after=729" in around


def test_a_link_into_the_first_page_still_shows_the_steps_up_to_it(client, user):
    run = big_run(user, 450)
    client.force_login(user)
    page = html(client.get(reverse("run", args=[run.pk]), {"step": 150}))
    assert 'id="step-1"' in page and 'id="step-200"' in page and "Load earlier" not in page


def _mixed(n: int) -> list[dict]:
    tools = ("get_weather", "calculator")
    return [{"kind": "tool", "name": tools[i % 2], "text": f"observation {i}",
             "status": "error" if i % 50 == 0 else "ok", "duration_ms": 10.0}
            if i % 3 else {"kind": "thought", "text": f"thinking about Paris {i}"}
            for i in range(1, n + 1)]


def test_search_finds_steps_by_text_kind_tool_and_status(client, user, other_user):
    run = make_run(user, _mixed(300))
    client.force_login(user)
    url = reverse("run_find", args=[run.pk])
    page = html(client.get(reverse("run", args=[run.pk])))
    assert f'hx-get="{url}"' in page and 'placeholder="Find in this run…"' in page
    text = html(client.get(url, {"q": "paris 150"}))
    assert 'data-go="150"' in text and "thinking about Paris 150" in text
    assert "1 match in steps 1–300 of 300" in text
    errors = html(client.get(url, {"status": "error", "name": "get_weather"}))
    assert errors.count("data-go=") == 4  # every 50th step is a failed tool, but 150 and 300
    assert all(f'data-go="{s}"' in errors for s in (50, 100, 200, 250))
    assert "calculator" not in html(client.get(url, {"status": "error"}))
    kinds = html(client.get(url, {"kind": "thought", "after": 290}))
    assert 'data-go="291"' in kinds and 'data-go="288"' not in kinds
    assert html(client.get(url, {"kind": "bogus"})).strip().endswith("check the fields.</p>")
    client.force_login(other_user)
    assert client.get(url, {"q": "Paris"}).status_code == 404


def test_search_reads_a_bounded_range_and_says_where_to_go_on(client, user, monkeypatch):
    monkeypatch.setattr(find, "SCAN_STEPS", 100)
    monkeypatch.setattr(find, "CHUNK", 30)
    run = make_run(user, _mixed(300))
    client.force_login(user)
    url = reverse("run_find", args=[run.pk])
    first = html(client.get(url, {"status": "error", "kind": "tool"}))
    assert "2 matches in steps 1–100 of 300" in first and 'data-go="100"' in first
    assert f'{url}?kind=tool&amp;status=error&amp;after=100' in first
    assert "Search on from #101" in first
    on = html(client.get(url, {"status": "error", "kind": "tool", "after": 100}))
    assert "1 match in steps 101–200" in on and 'data-go="200"' in on


@pytest.fixture
def summed(monkeypatch):
    """Runs past 100 steps get the aggregate timeline."""
    monkeypatch.setattr(timeline_summary, "SUMMED_FROM", 100)


def test_a_long_runs_timeline_is_an_aggregate_of_buckets(client, user, summed):
    run = make_run(user, _mixed(600))
    client.force_login(user)
    page = html(client.get(reverse("run", args=[run.pk])))
    assert "600 steps, a bar per 4 steps of a kind" in page
    stored = RunTimeline.objects.get(run=run)
    assert stored.upto == 600 and stored.width == 4
    # every step counted once, by kind
    assert sum(e[2] for e in stored.buckets if e[1] == "tool") == 400
    assert sum(e[2] for e in stored.buckets if e[1] == "thought") == 200
    bar = page.split('class="bar k-tool"')[1].split("</a>")[0]
    assert 'href="?step=1"' in bar and "#1–#4: 3 tool steps · 30 ms in all" in bar
    assert page.count('class="bar k-') == 300  # 150 buckets × 2 kinds, not 600 bars


def test_the_aggregate_grows_with_the_run_reading_only_new_steps(client, user, summed,
                                                                 django_assert_max_num_queries):
    run = make_run(user, _mixed(500))
    timeline_summary.update(run, 500)
    Step.objects.bulk_create(Step(run=run, seq=i, kind="llm", name="m", duration_ms=5.0,
                                  started_at=T0 + timedelta(seconds=i))
                             for i in range(501, 1001))
    summary = timeline_summary.update(run, 1000)
    assert summary.width == 8 and summary.upto == 1000  # 200 buckets at most: width doubled
    assert sum(e[2] for e in summary.buckets) == 1000
    assert sum(e[2] for e in summary.buckets if e[1] == "llm") == 500
    assert len({(e[0], e[1]) for e in summary.buckets}) == len(summary.buckets)
    assert max(e[0] for e in summary.buckets) == 124
    # the same as summing it all at once
    RunTimeline.objects.filter(run=run).delete()
    again = timeline_summary.update(run, 1000)
    assert sorted(again.buckets) == sorted(summary.buckets)


def test_a_timeline_never_summed_is_loaded_after_the_page(client, user, summed, monkeypatch):
    monkeypatch.setattr(timeline_summary, "INLINE_MAX", 50)
    run = make_run(user, _mixed(300))
    client.force_login(user)
    page = html(client.get(reverse("run", args=[run.pk])))
    url = reverse("run_timeline", args=[run.pk])
    assert f'hx-get="{url}" hx-trigger="load"' in page and 'class="bar k-' not in page
    assert not RunTimeline.objects.filter(run=run).exists()
    part = html(client.get(url))
    assert "300 steps, a bar per 2 steps of a kind" in part and 'class="bar k-tool"' in part
    again = html(client.get(reverse("run", args=[run.pk])))
    assert 'class="bar k-tool"' in again and f'hx-get="{url}"' not in again


def test_a_slow_search_stops_after_its_time_and_goes_on_from_there(client, user, monkeypatch):
    monkeypatch.setattr(find, "CHUNK", 40)
    monkeypatch.setattr(find, "BUDGET_S", 0.0)  # a chunk, then out of time
    run = make_run(user, _mixed(300))
    client.force_login(user)
    url = reverse("run_find", args=[run.pk])
    first = html(client.get(url, {"q": "no such words"}))
    assert "No match in steps 1–40 of 300" in first and "Search on from #41" in first
    last = html(client.get(url, {"q": "paris 297", "after": 280}))
    assert "1 match in steps 281–300 of 300" in last and "Search on" not in last


def test_a_live_runs_last_steps_are_not_stored_and_its_end_sums_it_again(user, summed,
                                                                        monkeypatch):
    monkeypatch.setattr(timeline_summary, "LIVE_MARGIN", 100)
    run = make_run(user, _mixed(600), status="running")
    shown = timeline_summary.update(run, 600, final=False)
    stored = RunTimeline.objects.get(run=run)
    assert (stored.upto, stored.final) == (500, False) and shown.upto == 600
    assert sum(e[2] for e in shown.buckets) == 600 and sum(e[2] for e in stored.buckets) == 500
    # an early step written again when it ends (a parent's time), then the run ends
    Step.objects.filter(run=run, seq=3).update(duration_ms=90_000.0)
    run.status = "succeeded"
    assert timeline_summary.stale(run, 600, final=True) == 600  # read again, once
    summed_again = timeline_summary.update(run, 600, final=True)
    assert (summed_again.upto, summed_again.final) == (600, True)
    assert max(e[4] for e in summed_again.buckets) == 90_000.0
    assert timeline_summary.stale(run, 600, final=True) == 0
