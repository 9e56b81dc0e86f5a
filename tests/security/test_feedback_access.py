"""Feedback follows its run's visibility, and only its author changes it: another account
(staff included) can neither edit nor delete it, nor give feedback on a run it cannot see;
what people type is shown as text."""

from __future__ import annotations

import pytest
from django.test import Client

from agentlab.feedback import record
from agentlab.feedback.models import Feedback
from tests.factories import make_run

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def alices(user):
    run = make_run(user, input="private question by alice")
    return run, record.give_note(run, 2, user, "private note by alice")


def test_a_second_account_cannot_edit_or_delete_anothers_feedback(alices, user, other_user,
                                                                  staff):
    run, note = alices
    for visitor in (other_user, staff):
        client = client_of(visitor)
        assert client.get(f"/feedback/{note.pk}/edit/").status_code == 404
        assert client.post(f"/feedback/{note.pk}/edit/", {"note": "rewritten"}).status_code == 404
        assert client.post(f"/feedback/{note.pk}/delete/").status_code == 404
    assert Feedback.objects.get(pk=note.pk).note == "private note by alice"
    # Staff see it (they see every run) but get no Edit or Delete beside it.
    page = client_of(staff).get(f"/runs/{run.pk}/").content.decode()
    assert "private note by alice" in page and f"/feedback/{note.pk}/edit/" not in page
    assert f"/feedback/{note.pk}/edit/" in client_of(user).get(f"/runs/{run.pk}/").content.decode()


def test_nobody_gives_or_reads_feedback_on_a_run_they_cannot_see(alices, other_user):
    run, _note = alices
    bob = client_of(other_user)
    for url, data in ((f"/feedback/runs/{run.pk}/0/thumbs/", {"value": "down"}),
                      (f"/feedback/runs/{run.pk}/2/give/", {"note": "bob was here"})):
        assert bob.post(url, data, **HTMX).status_code == 404
    assert bob.get(f"/feedback/runs/{run.pk}/2/").status_code == 404
    assert bob.get(f"/feedback/runs/{run.pk}/2/give/").status_code == 404
    assert Feedback.objects.count() == 1
    # Nor through the runs list's filter or the dashboard's counts (of bob's own runs).
    make_run(other_user, input="bob's run")
    assert "private question by alice" not in bob.get("/runs/?feedback=note").content.decode()
    assert "No feedback given" in bob.get("/dashboard/").content.decode()


def test_a_run_handed_to_nobody_takes_its_feedback_with_it(alices, other_user, user):
    """Feedback is read through its run each time: once the run is not the visitor's, the
    author's own row is out of reach too."""
    run, note = alices
    type(run).objects.filter(pk=run.pk).update(user=other_user)
    assert client_of(user).post(f"/feedback/{note.pk}/delete/").status_code == 404


def test_what_people_type_is_shown_as_text(alices, user):
    run, _note = alices
    record.give_note(run, 1, user, '<img src=x onerror="alert(1)">')
    page = client_of(user).get(f"/runs/{run.pk}/").content.decode()
    assert '<img src=x onerror="alert(1)">' not in page
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
