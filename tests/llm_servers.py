"""LLM servers for tests (a pytest plugin): the scripted fake and the real embedded model."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentlab.llm.local_server import LocalModelServer
from agentlab.llm.types import ProfileConfig
from tests.fake_openai import FakeOpenAI


def pytest_configure(config: pytest.Config) -> None:
    # Also declared in pyproject.toml; repeated here so the plugin works on its own.
    config.addinivalue_line(
        "markers", "embedded: needs the embedded SmolLM2 model server (session fixture)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A test that uses the real model is an `embedded` test, marked or not, so that
    # `-m "not embedded"` always leaves the model server unstarted.
    for item in items:
        if {"embedded_llm", "embedded_profile"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.embedded)


@pytest.fixture(scope="session")
def _fake_llm_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def fake_llm(_fake_llm_server: FakeOpenAI) -> Iterator[FakeOpenAI]:
    """A scripted OpenAI-compatible server, empty for each test (one socket, reset between)."""
    _fake_llm_server.reset()
    yield _fake_llm_server
    _fake_llm_server.reset()


@pytest.fixture
def fake_profile(fake_llm: FakeOpenAI) -> ProfileConfig:
    return ProfileConfig(name="scripted", base_url=fake_llm.base_url, model="scripted-model",
                         timeout_s=2, retries=2, backoff_s=0.01,
                         price_in_per_m=1.0, price_out_per_m=2.0)


@pytest.fixture(scope="session")
def embedded_llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real SmolLM2 server, started once per test session on a free port."""
    log = tmp_path_factory.mktemp("llm") / "server.log"
    server = LocalModelServer(port=0, log_path=log, write_state=False, n_ctx=4096)
    server.start(timeout_s=180)
    yield server.base_url
    server.stop()


@pytest.fixture
def embedded_profile(embedded_llm: str) -> ProfileConfig:
    return ProfileConfig(name="Local SmolLM2", base_url=embedded_llm, model="",
                         timeout_s=120, retries=0, temperature=0.0, max_tokens=128)
