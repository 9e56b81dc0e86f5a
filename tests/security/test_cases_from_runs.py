"""Cases from runs with a second account: only runs the visitor may see, only into suites they
may edit; a suite made from runs is its owner's; playground cases are their owner's alone; the
counts and sizes one request may send are refused with a sentence, nothing written."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from agentlab.evals import from_runs
from agentlab.evals.models import Case, PlaygroundCase, Suite
from tests.factories import make_run

pytestmark = pytest.mark.django_db

ADD = reverse("evals:add_runs")


@pytest.fixture
def alice_run(user):
    return make_run(user, input="alice-private-question", final_answer="alice-private-answer")


@pytest.fixture
def alice_suite(user, alice_run):
    suite = Suite.objects.create(name="Alice's", owner=user)
    Case.objects.create(suite=suite, position=1, question="alice-private-question",
                        expected="alice-private-answer", source_run=alice_run)
    return suite


def nothing_new(suites: int = 1, cases: int = 1) -> bool:
    return Suite.objects.count() == suites and Case.objects.count() == cases


def test_another_users_run_cannot_be_added_anywhere(client, other_user, alice_run, alice_suite):
    client.force_login(other_user)
    mine = make_run(other_user)
    for data in ({"suite": "new", "new_suite": "Stolen"}, {"suite": alice_suite.pk}):
        response = client.post(ADD, {"run": [mine.pk, alice_run.pk], **data})
        assert response.status_code == 404
    assert client.get(ADD, {"run": alice_run.pk}).status_code == 404  # not even the form
    assert nothing_new()


def test_a_run_cannot_go_into_another_users_or_a_shared_suite(client, user, other_user,
                                                               alice_suite):
    shared = Suite.objects.create(name="Shared")
    client.force_login(other_user)
    mine = make_run(other_user)
    assert client.post(ADD, {"run": mine.pk, "suite": alice_suite.pk}).status_code == 404
    assert client.post(ADD, {"run": mine.pk, "suite": shared.pk}).status_code == 404
    assert client.post(ADD, {"run": mine.pk, "suite": "1 OR 1=1"}).status_code == 404
    assert nothing_new(suites=2)


def test_staff_may_add_anyones_run_to_any_suite(client, staff, alice_run):
    shared = Suite.objects.create(name="Shared")
    client.force_login(staff)
    assert client.post(ADD, {"run": alice_run.pk, "suite": shared.pk}).status_code == 302
    assert shared.cases.get().source_run == alice_run


def test_a_suite_made_from_runs_is_its_owners(client, user, other_user, alice_suite):
    client.force_login(other_user)
    assert client.get(reverse("evals:suite", args=[alice_suite.pk])).status_code == 404
    index = client.get(reverse("evals:index")).content.decode()
    assert "Alice&#x27;s" not in index and "alice-private" not in index
    start = client.post(reverse("evals:index"), {"suite": alice_suite.pk, "concurrency": 1})
    assert start.status_code == 200 and "That suite no longer exists." in start.content.decode()
    client.force_login(user)
    assert "alice-private-answer" in client.get(
        reverse("evals:suite", args=[alice_suite.pk])).content.decode()


def test_a_run_page_shows_only_the_cases_in_suites_the_visitor_sees(client, user, staff,
                                                                    alice_run):
    private = Suite.objects.create(name="Staff notes", owner=staff)
    Case.objects.create(suite=private, position=1, question="q", expected="a",
                        source_run=alice_run)
    client.force_login(user)
    assert "Staff notes" not in client.get(reverse("run", args=[alice_run.pk])).content.decode()
    client.force_login(staff)
    assert "Staff notes #1" in client.get(reverse("run", args=[alice_run.pk])).content.decode()


def test_a_suite_page_links_only_runs_the_visitor_sees(client, user, staff, alice_run):
    shared = Suite.objects.create(name="Shared")
    Case.objects.create(suite=shared, position=1, question="q", expected="a",
                        source_run=alice_run)
    bob_run = make_run(staff)
    Case.objects.create(suite=shared, position=2, question="q2", expected="a",
                        source_run=bob_run)
    client.force_login(user)
    page = client.get(reverse("evals:suite", args=[shared.pk])).content.decode()
    assert f'href="/runs/{alice_run.pk}/"' in page and f'href="/runs/{bob_run.pk}/"' not in page
    assert 'title="a run you cannot see">a run</span>' in page


def test_counts_and_sizes_are_refused_before_anything_is_written(client, user):
    client.force_login(user)
    run = make_run(user)
    too_many = client.post(ADD, {"run": list(range(1, from_runs.MAX_RUNS + 2)),
                                 "suite": "new", "new_suite": "Big"})
    assert too_many.status_code == 400
    assert "101 runs at once, over the limit of 100" in too_many.content.decode()
    refusals = {
        f"expected-{run.pk}": ("x" * 20_001, "the expected answer is 20,001 characters, over "
                                             "the limit of 20,000"),
        "tags": (",".join(f"t{i}" for i in range(21)), "tags: 21 tags, over the limit of 20"),
        "new_suite": ("n" * 201, "suite: the name is 201 characters, over the limit of 200"),
    }
    for field, (value, said) in refusals.items():
        data = {"run": run.pk, "suite": "new", "new_suite": "Fine", field: value}
        response = client.post(ADD, data)
        assert response.status_code == 400 and said in response.content.decode(), field
    long_tag = client.post(ADD, {"run": run.pk, "suite": "new", "new_suite": "Fine",
                                 "tags": "ok, " + "t" * 51})
    assert "is 51 characters, over the limit of 50 for a tag" in long_tag.content.decode()
    huge_tags = client.post(ADD, {"run": run.pk, "suite": "new", "tags": "x" * 100_000})
    assert "tags: 100,000 characters, over the limit" in huge_tags.content.decode()
    assert not Suite.objects.exists() and not Case.objects.exists()


def test_an_imported_runs_huge_question_is_refused(client, user):
    client.force_login(user)
    run = make_run(user, input="q" * 100_001)
    response = client.post(ADD, {"run": run.pk, "suite": "new", "new_suite": "Big"})
    assert "its question is 100,001 characters, over the limit of 100,000" in \
        response.content.decode()
    assert not Case.objects.exists()


def test_playground_cases_are_their_owners_alone(client, user, other_user, staff, alice_run):
    case = PlaygroundCase.objects.create(user=user, name="alice-case", source_run=alice_run,
                                         source_seq=2, messages=[{"role": "user",
                                                                  "content": "hi"}])
    save = reverse("evals:playground_case_save", args=[alice_run.pk, 2])
    data = {"messages": json.dumps([{"role": "user", "content": "x"}]), "params": "{}"}
    for visitor in (other_user, staff):
        client.force_login(visitor)
        assert client.get(reverse("evals:playground_case", args=[case.pk])).status_code == 404
        assert client.post(reverse("evals:playground_case", args=[case.pk]),
                           data).status_code == 404
        assert client.post(reverse("evals:playground_case_delete",
                                   args=[case.pk])).status_code == 404
        assert "alice-case" not in client.get(reverse("evals:playground_cases")).content.decode()
    client.force_login(other_user)
    assert client.post(save, data).status_code == 404  # not a run bob may see
    assert PlaygroundCase.objects.get() == case
