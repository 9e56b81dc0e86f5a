"""What the browser tests share beyond tests/browser_fixtures.py: the calculator agent."""

from __future__ import annotations

import pytest


@pytest.fixture
def agent(calc_agent):
    """A function-calling ReAct agent with the calculator, on the scripted model server."""
    return calc_agent
