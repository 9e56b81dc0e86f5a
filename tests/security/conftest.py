"""What the hostile tests share: the calculator agent on the scripted model, and users without
passwords (force_login; password hashing is slow on a busy machine); for the gateway's tests
its scripted profile and the end of its open runs. `stop_runs` (stop what the live socket
tests ran) comes from tests/sockets.py."""

from __future__ import annotations

import pytest


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("alice")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user("bob")


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_superuser("root", password=None)


def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> None:
    """A failing Hypothesis test (test_fuzz.py) has its failing example printed; the patch
    Hypothesis would also write with libcst (mutmut brings it) crashes pytest with an
    INTERNALERROR under the libcst installed here, hiding the failure: no patch."""
    item.__dict__.pop("_hypothesis_failing_examples", None)
