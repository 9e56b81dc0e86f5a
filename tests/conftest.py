"""Shared fixtures: users (tests/fixtures.py), LLM servers, scripted and embedded
(tests/llm_servers.py), daphne and Chromium for browser tests (tests/browser_fixtures.py), a
real redis-server for the cross-process live path (tests/redis_fixtures.py)."""

from __future__ import annotations

pytest_plugins = ["tests.fixtures", "tests.llm_servers", "tests.browser_fixtures",
                  "tests.redis_fixtures"]
