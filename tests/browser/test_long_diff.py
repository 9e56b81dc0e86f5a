"""The diff of two long runs in real Chromium: it opens on the first divergence, equal plans
are folded to one line each (and open one level when clicked), and "Show more rows" brings
the next rows in place."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.factories import make_run
from tests.long_runs import planned

pytestmark = [pytest.mark.browser]


def test_a_long_diff_opens_on_the_first_divergence_folds_and_loads_more(page, live_url, user):
    a = make_run(user, planned(600, 9))
    b = make_run(user, planned(600, 9, changed=frozenset({400, 590})))
    page.goto(f"{live_url}/runs/diff/?a={a.pk}&b={b.pk}")
    first = page.locator("#first-divergence")
    expect(first).to_contain_text("#4003")  # plan 400's tool, the first that differs
    expect(first.locator("td.right ins")).to_have_text(["Lyon"])
    expect(page.locator("tr.earlier")).to_contain_text("3,998 rows above this page, all equal")
    expect(page.locator("tr.op-changed, tr.op-equal, tr.fold")).not_to_have_count(0)
    assert page.locator("tr.op-changed, tr.op-equal").count() < 300  # a page, not 6,000 rows
    plan = page.locator("tr.fold", has=page.locator(".subtree-summary")).first
    expect(plan.locator("summary")).to_contain_text("9 steps inside, all equal")
    expect(plan.locator("details")).not_to_have_attribute("open", "")
    plan.locator("summary").click()
    expect(plan.locator("details tr.op-equal")).to_have_count(9)  # loaded one level down
    rows_before = page.locator("tr.fold").count()
    more = page.locator("tr.more a.more-rows").first
    more.click()
    expect(page.locator("tr.fold")).not_to_have_count(rows_before)
    expect(page.get_by_text("inside: 1 changed, 8 equal")).to_have_count(2)  # plans 400, 590
    assert page.js_errors == []
