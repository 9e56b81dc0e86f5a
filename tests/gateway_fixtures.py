"""The fixtures the gateway's test modules share (a plugin of tests/conftest.py): a gateway
token of the `user` fixture, the scripted model's profile, and the gateway runs a test left
open ended after it. A module's own fixture of the same name wins (an ingest `token`)."""

from __future__ import annotations

import pytest

from agentlab.gateway.sessions import TABLE
from agentlab.tokens.models import create_token
from tests.gateway_clients import scripted_profile


@pytest.fixture
def token(user):
    return create_token(user, "my agent", "gateway")[1]


@pytest.fixture
def profile(fake_llm):
    """The scripted model's profile, `scripted` (tests/gateway_clients.py)."""
    return scripted_profile(fake_llm)


@pytest.fixture
async def ended():
    """End every gateway run the test left open (as the quiet closer would)."""
    yield
    await TABLE.close_quiet(0)
