"""Live scorers: only staff with the admin's permissions configure them; their scores follow
the runs' visibility (a second account sees neither another's scored runs nor their count),
an alert is shown to staff and to the one user whose runs made it, and the pages take no POST."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from agentlab.monitors import passes
from agentlab.monitors.models import Alert, LiveScorer
from tests.factories import make_run

pytestmark = pytest.mark.django_db
ADD = "/admin/monitors/livescorer/add/"
FORM = {"name": "watch", "enabled": "on", "kind": "contains", "expected": "sunny",
        "agent_name": "Weather agent", "key": "watch", "sample_rate": "1", "timeout_s": "5",
        "max_tokens": "100", "window": "5", "alert_op": "below", "watermark": "0"}


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def answered(user, question: str) -> None:
    make_run(user, [{"kind": "final", "text": "It is sunny.", "output": "It is sunny."}],
             input=question)


@pytest.fixture
def live() -> LiveScorer:
    return LiveScorer.objects.create(name="watch", kind="contains", expected="sunny",
                                     agent_name="Weather agent", key="watch", window=1,
                                     alert_on="score", alert_op="above", alert_threshold=0.5)


@pytest.fixture
def scored(live, user, other_user) -> LiveScorer:
    answered(user, "alice's private question")
    answered(other_user, "bob's own question")
    passes.run_once()
    return live


def test_a_second_account_sees_only_its_own_runs_scores(scored, user, other_user, staff):
    page = client_of(other_user).get(f"/scorers/{scored.pk}/").content.decode()
    assert "bob&#x27;s own question" in page and "alice" not in page
    assert "Figures count your runs only" in page and '<span class="figure-value">1</span>' in page
    page = client_of(staff).get(f"/scorers/{scored.pk}/").content.decode()
    assert "alice&#x27;s private question" in page and "bob&#x27;s own question" in page
    assert '<span class="figure-value">2</span>' in page


def test_an_alert_is_shown_to_staff_and_to_the_user_whose_runs_made_it(live, user,
                                                                       other_user, staff):
    def sees(visitor) -> bool:
        client = client_of(visitor)
        banner = "open alert" in client.get("/scorers/alerts/banner/").content.decode()
        listed = "alert-open" in client.get("/scorers/alerts/").content.decode()
        assert banner == listed
        return banner

    answered(user, "alice's private question")
    passes.run_once()
    assert Alert.objects.get().owner == user  # opened on alice's run alone
    assert (sees(user), sees(other_user), sees(staff)) == (True, False, True)
    answered(other_user, "bob's own question")
    passes.run_once()  # still open, now over bob's run: staff's alone
    assert Alert.objects.get().owner is None
    assert (sees(user), sees(other_user), sees(staff)) == (False, False, True)


def test_only_staff_with_the_permission_configure_scorers(user, django_user_model):
    assert client_of(user).get(ADD).status_code == 302  # not staff: the admin's login
    clerk = django_user_model.objects.create_user("clerk", is_staff=True)
    assert client_of(clerk).get(ADD).status_code == 403
    assert client_of(clerk).post(ADD, FORM).status_code == 403
    assert not LiveScorer.objects.exists()
    clerk.user_permissions.add(Permission.objects.get(codename="add_livescorer"))
    clerk = django_user_model.objects.get(pk=clerk.pk)  # permissions are cached per object
    assert client_of(clerk).post(ADD, FORM).status_code == 302
    assert LiveScorer.objects.get().name == "watch"


def test_a_slow_regex_is_refused_in_the_admin(staff):
    response = client_of(staff).post(ADD, {**FORM, "kind": "regex", "expected": "(a|aa)+$"})
    assert response.status_code == 200 and "backtracks" in response.content.decode()
    assert not LiveScorer.objects.exists()


@pytest.mark.parametrize("path", ["/scorers/", "/scorers/alerts/", "/scorers/alerts/banner/"])
def test_the_pages_take_no_post(path, staff):
    assert client_of(staff).post(path).status_code == 405
