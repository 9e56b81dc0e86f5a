"""Shared fixtures: users (tests/fixtures.py), LLM servers, scripted and embedded
(tests/llm_servers.py), daphne and Chromium for browser tests (tests/browser_fixtures.py), a
real redis-server for the cross-process live path (tests/redis_fixtures.py), stopping the runs a
live-socket test started (tests/sockets.py), the real Phoenix (tests/phoenix_fixtures.py), the
gateway's token, scripted profile and end of open runs (tests/gateway_fixtures.py).

Shared helpers and fixtures live in such helper modules, never in a test_*.py module: no test
module imports another (tests/test_layers.py checks it)."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

# The operator's allow-list of key variables (agentlab/llm/keys.py) in the tests: the default
# providers' names and the ones tests set; the processes tests start inherit it.
os.environ.setdefault("AGENTLAB_KEY_VARIABLES", ",".join([
    "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HF_TOKEN", "AGENTLAB_TEST_KEY",
    "AGENTLAB_TEST_SECRET_KEY", "AGENTLAB_UNSET_KEY", "LAB_MCP_TOKEN", "P_API_KEY",
    "PROVIDER_API_KEY", "HELPER_KEY"]))

# No review-rules thread in the processes tests start (daphne): a test runs the pass itself
# (agentlab/review/sync.py); in this process the fixture below turns it off.
os.environ.setdefault("AGENTLAB_REVIEW_SYNC_S", "0")
# A gateway run ends after this many quiet seconds (the processes tests start too): long
# enough for an agent between two calls, short enough for a test to see it end.
os.environ.setdefault("AGENTLAB_GATEWAY_IDLE_S", "5")

pytest_plugins = ["tests.fixtures", "tests.llm_servers", "tests.browser_fixtures",
                  "tests.redis_fixtures", "tests.sockets", "tests.otel_fixtures",
                  "tests.phoenix_fixtures", "tests.gateway_fixtures"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under mutation testing, a mutant's tests run quickest first (mutmut stops at the first
    failure and hands them over in no order): most mutants are caught by a short test, so
    running the slow ones last saves most of a module's time. The durations are those of
    mutmut's clean run, in its mutmut-stats.json, next to the mutated code."""
    stats = Path("mutmut-stats.json")
    if "__mutmut_" not in os.environ.get("MUTANT_UNDER_TEST", "") or not stats.exists():
        return
    durations = json.loads(stats.read_text()).get("duration_by_test", {})
    items.sort(key=lambda item: durations.get(item.nodeid, 0.0))


@pytest.fixture(scope="session", autouse=True)
def one_round_password_hashes() -> None:
    """Users are made and logged in by hundreds of tests; see tests/hashers.py."""
    from django.conf import settings
    from django.contrib.auth import hashers

    settings.PASSWORD_HASHERS = ["tests.hashers.OneRoundPBKDF2"]
    hashers.get_hashers.cache_clear()
    hashers.get_hashers_by_algorithm.cache_clear()


@pytest.fixture(scope="session", autouse=True)
def no_review_rules_thread() -> None:
    """Requests of the test client would start the review rules' thread (on its first
    request), which would write into the tests' database from another thread."""
    from django.conf import settings

    settings.AGENTLAB_REVIEW_SYNC_S = 0


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None
                                 ) -> Iterator[None]:
    """The test database's settings. Under mutation testing (scripts/mutate), each mutant's
    process works on its own copy of the SQLite test database: mutants run side by side, and
    one's flush at the end of a test must not delete the rows another is reading (that would
    count a mutant as killed by a test that failed for another reason)."""
    mutant = os.environ.get("MUTANT_UNDER_TEST", "")
    from django.conf import settings

    # PostgreSQL (the scale profile): no pool in this process. Its threads (async_to_sync's,
    # the tests' own) end without closing their connections, so each would keep a pooled one
    # for ever; the app processes the tests start (daphne, workers) use the pool.
    settings.DATABASES["default"].get("OPTIONS", {}).pop("pool", None)
    test = settings.DATABASES["default"].setdefault("TEST", {})
    if "__mutmut_" not in mutant or not str(test.get("NAME", "")).endswith(".sqlite3"):
        yield
        return
    shared = Path(test["NAME"])
    own = shared.with_name(f"{shared.stem}-{os.getpid()}.sqlite3")
    if shared.exists():  # made by mutmut's clean run (--reuse-db): no migrations again
        # SQLite's backup, not a file copy: the latest writes may still be in the WAL file.
        with closing(sqlite3.connect(shared)) as source, closing(sqlite3.connect(own)) as copy:
            source.backup(copy)
    test["NAME"] = str(own)
    yield
    for path in (own, own.with_name(own.name + "-wal"), own.with_name(own.name + "-shm")):
        path.unlink(missing_ok=True)


@pytest.fixture
def quick_retries(monkeypatch):
    """The recorder's retries of a status and of a closing step's row, in 10 ms."""
    from agentlab.runs import recorder

    monkeypatch.setattr(recorder, "STATUS_RETRY_DELAYS_S", (0.01, 0.01, 0.01))
    monkeypatch.setattr(recorder, "CLOSING_RETRY_DELAYS_S", (0.01, 0.01))
