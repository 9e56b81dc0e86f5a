"""The diff page of two long runs: it opens on the first divergence, pages the rest (a "more"
that htmx loads, a position the URL names), and says per subtree what changed, equal subtrees
folded."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.factories import make_run
from tests.long_runs import planned
from traces.views import diff as diff_view

pytestmark = pytest.mark.django_db


def get(client, **params) -> str:
    response = client.get(reverse("run_diff"), params)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


@pytest.fixture
def long_pair(client, user, monkeypatch):
    monkeypatch.setattr(diff_view, "PAGE_ROWS", 30)
    a = make_run(user, planned(120, 9))
    b = make_run(user, planned(120, 9, changed=frozenset({80, 110})))
    client.force_login(user)
    return a, b


def shown_seqs(page: str) -> list[int]:
    """The step numbers of the rows shown (left side), in order."""
    return [int(n) for n in re.findall(r'<td class="side left">.*?>#(\d+)</a>', page, re.S)]


def test_the_page_opens_on_the_first_divergence(client, long_pair):
    a, b = long_pair
    page = get(client, a=a.pk, b=b.pk)
    seqs = shown_seqs(page)
    assert seqs[0] == 799  # four rows above plan 80's changed tool (step 803, row 802)
    assert 'id="first-divergence"' in page and "↑ Earlier rows" in page
    assert "798 rows above this page, all equal" in page
    assert "0 changed" not in page and "2 changed" in page  # the counts of the whole diff
    assert f'hx-get="/runs/diff/?a={a.pk}&amp;b={b.pk}&amp;part=rows&amp;at=' in page
    assert "more rows not shown" in page


def test_the_next_page_loads_the_rows_after_this_one(client, long_pair):
    a, b = long_pair
    page = get(client, a=a.pk, b=b.pk)
    at = int(re.search(r'part=rows&amp;at=(\d+)"', page).group(1))
    more = get(client, a=a.pk, b=b.pk, part="rows", at=at)
    assert "<html" not in more and "<tr" in more  # rows for htmx to put in place
    assert 'id="first-divergence"' not in more
    assert "plan 110" not in page
    assert "plan 110" in more and "1 changed, 8 equal" in more  # the second change
    whole = get(client, a=a.pk, b=b.pk, at=at)  # the URL names the position
    assert "plan 110" in whole and "<html" in whole


def test_equal_subtrees_are_folded_with_their_line_and_open_one_level(client, long_pair):
    a, b = long_pair
    page = get(client, a=a.pk, b=b.pk, at=0)
    assert "↑ Earlier rows" not in page
    assert page.count("9 steps inside, all equal") == 30  # a page of folded plans
    assert shown_seqs(page) == []  # none shown open
    url = re.search(r'<details hx-get="([^"]+)"', page).group(1).replace("&amp;", "&")
    assert "flat=1" in url and "stop=10" in url
    inside = client.get(url).content.decode()
    assert shown_seqs(inside) == list(range(2, 11))  # plan 0's nine steps
    changed = get(client, a=a.pk, b=b.pk)
    assert "inside: 1 changed, 8 equal" in changed  # the plan that changed is open
