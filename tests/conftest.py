"""Shared fixtures. LLM servers (scripted and embedded) come from tests/llm_servers.py."""

from __future__ import annotations

import pytest

pytest_plugins = ["tests.llm_servers"]


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="alice", password="pw-alice-123")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user(username="bob", password="pw-bob-123")


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_superuser(username="root", password="pw-root-123")
