"""Shared fixtures: users (tests/fixtures.py), LLM servers, scripted and embedded
(tests/llm_servers.py), daphne and Chromium for browser tests (tests/browser_fixtures.py)."""

from __future__ import annotations

pytest_plugins = ["tests.fixtures", "tests.llm_servers", "tests.browser_fixtures"]
