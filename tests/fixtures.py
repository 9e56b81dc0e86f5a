"""Users for the tests (a pytest plugin, loaded by conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="alice", password="pw-alice-123")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user(username="bob", password="pw-bob-123")


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_superuser(username="root", password="pw-root-123")
