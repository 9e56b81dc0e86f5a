"""traces.access called directly (sync, in the test's own thread): who may do what to a run,
read fresh from the database each time. The pages and sockets that ask it are covered by
tests/security/test_access_matrix.py; this pins the policy itself."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser
from django.http import Http404

from traces import access
from traces.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(user):
    return Run.objects.create(user=user, input="q", agent_name="t", paradigm="react")


def test_the_owner_and_staff_may_watch_others_and_anonymous_may_not(run, user, other_user,
                                                                     staff):
    for who, expected in [(user, True), (staff, True), (other_user, False),
                          (AnonymousUser(), False), (None, False)]:
        assert access.may_act(who, "watch", run.pk) is expected
        assert access.can_see_run(who, run.pk) is expected
        if expected:
            assert access.visible_run(who, run.pk) == run
            assert access.run_for(who, "fork", run.pk) == run
        else:
            with pytest.raises(Http404, match=f"no run {run.pk}"):
                access.visible_run(who, run.pk)


def test_a_conversation_is_its_owners_alone_and_a_deactivated_owner_has_no_rights(
        run, user, staff):
    assert access.may(user, "converse", Run.objects.all(), run.pk)
    assert not access.may(staff, "converse", Run.objects.all(), run.pk)
    assert access.allowed(staff, "control", run) and not access.allowed(staff, "converse", run)
    user.is_active = False
    user.save()
    assert not access.may_act(user, "watch", run.pk)
    assert access.roles(user, run.user_id) == frozenset()


def test_a_missing_row_and_a_narrowed_queryset_are_refused_alike(run, user):
    assert not access.may_act(user, "watch", run.pk + 1000)
    assert not access.allowed(user, "watch", None)
    with pytest.raises(Http404):
        access.run_for(user, "watch", run.pk + 1000)
    with pytest.raises(Http404):  # outside the rows the page looks in
        access.visible_run(user, run.pk, Run.objects.filter(status="succeeded"))
    assert access.visible_run(user, run.pk, Run.objects.filter(status="queued")) == run


def test_ownership_is_read_now_not_remembered(run, user, other_user):
    assert access.may_act(user, "control", run.pk)
    Run.objects.filter(pk=run.pk).update(user=other_user)  # given to someone else
    assert not access.may_act(user, "control", run.pk)
    assert access.may_act(other_user, "approve", run.pk)
    assert access.roles(other_user, other_user.pk) == frozenset({"owner"})
    assert access.roles(other_user, None) == frozenset()
