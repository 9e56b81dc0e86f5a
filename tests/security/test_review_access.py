"""Review queues and who reaches what (docs/REVIEW.md "Who sees what", docs/SECURITY.md): only a
queue's reviewers and staff reach it; a reviewer sees an item of a run they may not otherwise
see only when the queue's staff owner put it there; the queue never opens the run's own page;
every POST is checked on its own; what reviewers type is shown as text."""

from __future__ import annotations

import pytest
from django.test import Client

from agentlab.feedback.models import Feedback, FeedbackKey
from agentlab.review import sync
from agentlab.review.models import Item, Queue, Review, Rule
from tests.factories import make_queue, make_run

pytestmark = pytest.mark.django_db
SECRET = "the private question of alice"


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def carol(django_user_model):
    return django_user_model.objects.create_user("carol")


@pytest.fixture
def world(user, staff, carol):
    """root's queue, reviewed by carol, holding alice's run (which carol may not see)."""
    run = make_run(user, input=SECRET)
    queue = make_queue(staff, [carol], name="Root's queue", runs=[run])
    return queue, queue.items.get(), run


def pages(queue, item, run) -> list[tuple[str, str, dict]]:
    base = f"/review/{queue.pk}"
    return [("get", f"{base}/", {}), ("get", f"{base}/work/", {}),
            ("get", f"{base}/items/{item.pk}/", {}),
            ("get", f"/review/runs/{run.pk}/steps/6/payload/text/", {}),
            ("get", f"/review/runs/{run.pk}/steps/2/messages/", {}),
            ("post", f"{base}/items/{item.pk}/answer/", {"thumbs": "down", "note": "bob"}),
            ("post", f"{base}/items/{item.pk}/skip/", {})]


def test_a_second_account_neither_reviews_in_a_queue_nor_reads_its_items(world, other_user):
    queue, item, run = world
    bob = client_of(other_user)
    for method, url, data in pages(queue, item, run):
        assert getattr(bob, method)(url, data).status_code == 404, url
    assert not Feedback.objects.exists() and not Review.objects.exists()
    assert "Root's queue" not in bob.get("/review/").content.decode()


def test_the_staff_owners_items_are_shown_to_a_reviewer_and_nothing_more(world, carol, staff,
                                                                        django_user_model):
    queue, item, run = world
    c = client_of(carol)
    for method, url, data in pages(queue, item, run)[:5]:
        assert getattr(c, method)(url, data).status_code in (200, 302), url
    assert SECRET in c.get(f"/review/{queue.pk}/items/{item.pk}/").content.decode()
    # The queue does not open the run's own page, its exports or its feedback strips.
    for url in (f"/runs/{run.pk}/", f"/runs/{run.pk}/export/",
                f"/runs/{run.pk}/steps/6/payload/text/", f"/feedback/runs/{run.pk}/0/"):
        assert c.get(url).status_code == 404, url
    assert SECRET not in c.get("/runs/").content.decode()
    # Another staff user's item of a run carol may not see stays hidden from her.
    other_admin = django_user_model.objects.create_superuser("root2", password=None)
    hidden = Item.objects.create(queue=queue, run=make_run(run.user, input="second secret"),
                                 added_by=other_admin)
    assert c.get(f"/review/{queue.pk}/items/{hidden.pk}/").status_code == 404
    assert "second secret" not in c.get(f"/review/{queue.pk}/").content.decode()
    # Her own run is hers to see, whoever added it.
    own = Item.objects.create(queue=queue, run=make_run(carol), added_by=other_admin)
    assert c.get(f"/review/{queue.pk}/items/{own.pk}/").status_code == 200
    # Once the owner is no longer staff, what they put in of others' runs is hidden too.
    type(staff).objects.filter(pk=staff.pk).update(is_staff=False, is_superuser=False)
    assert c.get(f"/review/{queue.pk}/items/{item.pk}/").status_code == 404
    assert c.get(f"/review/runs/{run.pk}/steps/6/payload/text/").status_code == 404
    assert c.post(f"/review/{queue.pk}/items/{item.pk}/answer/",
                  {"thumbs": "up"}).status_code == 404
    assert c.get(f"/review/{queue.pk}/items/{own.pk}/").status_code == 200
    # And a reviewer taken off the queue reaches nothing of it.
    queue.reviewers.remove(carol)
    assert c.get(f"/review/{queue.pk}/").status_code == 404
    assert c.get(f"/review/{queue.pk}/items/{own.pk}/").status_code == 404


def test_a_deactivated_reviewer_reaches_nothing(world, carol):
    queue, item, _run = world
    c = client_of(carol)
    type(carol).objects.filter(pk=carol.pk).update(is_active=False)
    assert c.get(f"/review/{queue.pk}/items/{item.pk}/").status_code in (302, 404)
    assert not Queue.objects.reachable_by(type(carol).objects.get(pk=carol.pk)).exists()


def test_only_staff_make_change_and_fill_queues(world, user, carol):
    queue, _item, run = world
    for person in (user, carol):  # a reviewer is no manager
        c = client_of(person)
        assert c.post("/review/new/", {"name": "mine", "mode": "single", "thumbs": "on",
                                       "reviewers": [person.pk],
                                       "reviews_needed": 1}).status_code == 404
        assert c.post("/review/fill/", {"queue": queue.pk, "query": ""}).status_code == 404
        assert c.post(f"/review/{queue.pk}/edit/", {"name": "taken"}).status_code == 404
        assert c.post(f"/review/{queue.pk}/rules/", {"which": "finished",
                                                     "percent": "100"}).status_code == 404
        assert c.get(f"/review/pair/?a={run.pk}&b={run.pk}").status_code == 404
    assert list(Queue.objects.values_list("name", flat=True)) == ["Root's queue"]
    assert not Rule.objects.exists() and queue.items.count() == 1


def test_a_rule_reads_runs_as_its_owner_sees_them(world, staff, user):
    queue, _item, _run = world
    Rule.objects.create(queue=queue, query="", percent=100)
    type(staff).objects.filter(pk=staff.pk).update(is_staff=False, is_superuser=False)
    new = make_run(user, input="alice's new run")
    sync.run_pass()
    assert not queue.items.filter(run=new).exists()  # root no longer sees alice's runs


def test_a_forged_answer_writes_only_the_queues_rubric(world, carol):
    queue, item, run = world
    outside = FeedbackKey.objects.create(name="secret-key", kind="boolean")
    client_of(carol).post(f"/review/{queue.pk}/items/{item.pk}/answer/", {
        "thumbs": "up", f"key-{outside.pk}": "yes", "run": "999", "author": "root"})
    assert list(Feedback.objects.values_list("run_id", "name", "author__username")) == [
        (run.pk, "thumbs", "carol")]


def test_what_reviewers_type_is_shown_as_text(world, carol, staff):
    queue, item, _run = world
    client_of(carol).post(f"/review/{queue.pk}/items/{item.pk}/answer/",
                          {"thumbs": "up", "note": '<img src=x onerror="alert(1)">'})
    page = client_of(staff).get(f"/review/{queue.pk}/").content.decode()
    assert '<img src=x onerror="alert(1)">' not in page
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page


def test_staff_who_are_not_reviewers_look_but_do_not_answer(world, staff):
    queue, item, _run = world
    root = client_of(staff)
    assert root.get(f"/review/{queue.pk}/items/{item.pk}/").status_code == 200
    response = root.post(f"/review/{queue.pk}/items/{item.pk}/answer/", {"thumbs": "down"})
    assert response.status_code == 302
    root.post(f"/review/{queue.pk}/items/{item.pk}/skip/")
    assert not Feedback.objects.exists() and not Review.objects.exists()
