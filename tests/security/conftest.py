"""What the hostile tests share: the calculator agent on the scripted model, and users without
passwords (force_login; password hashing is slow on a busy machine)."""

from __future__ import annotations

import pytest

from tests import test_consumers

# The live socket tests' fixtures: a calculator agent on the scripted model; stop what ran.
agent, stop_runs = test_consumers.agent, test_consumers.stop_runs


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("alice")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user("bob")


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_superuser("root", password=None)
