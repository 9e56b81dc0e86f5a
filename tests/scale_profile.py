"""`python -m pytest -p tests.scale_profile …`: the tests on the scale profile's servers.

A real PostgreSQL becomes DATABASE_URL (pytest-django makes its test database there) and a
real Redis becomes REDIS_URL (the channels-redis layer), both started on free loopback ports
before Django reads its settings and stopped when the session ends. scripts/test runs the
live path's tests this way after the whole suite on SQLite (docs/TESTING.md).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentlab.bench.servers import PostgresServer, RedisServer

_STARTED: list[PostgresServer | RedisServer] = []


@pytest.hookimpl(tryfirst=True)  # before pytest-django's hook reads the settings
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser,
                                  args: list[str]) -> None:
    postgres = PostgresServer().start()
    _STARTED.append(postgres)
    redis = RedisServer(Path(tempfile.mkdtemp(prefix="agentlab-redis-"))).start()
    _STARTED.append(redis)
    os.environ["DATABASE_URL"] = postgres.url
    os.environ["REDIS_URL"] = redis.url


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [f"scale profile: DATABASE_URL={os.environ['DATABASE_URL']} "
            f"REDIS_URL={os.environ['REDIS_URL']}"]


def pytest_unconfigure(config: pytest.Config) -> None:
    while _STARTED:
        _STARTED.pop().stop()


@pytest.fixture(autouse=True)
def _a_channel_layer_per_test() -> Iterator[None]:
    """channels-redis binds its locks to the event loop that first used the layer, and each test
    has a loop of its own: each test gets a layer of its own, as each process does in
    production."""
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture(scope="session", autouse=True)
def _no_session_left_on_the_test_database(django_db_setup: None,
                                          django_db_blocker: Any) -> Iterator[None]:
    """Threads that ran a step (the recorder's writer, sync_to_async's) keep their connections
    open, and PostgreSQL will not drop a database in use: end them before pytest-django drops
    it (this tears down first, as it was set up after)."""
    yield
    from django.db import connection

    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                       " WHERE datname = current_database() AND pid <> pg_backend_pid()")
