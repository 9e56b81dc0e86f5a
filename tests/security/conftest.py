"""What the hostile tests share beyond every test's fixtures (tests/fixtures.py: `user`,
`other_user`, `staff`, with passwords hashed in one round: tests/hashers.py; tests/
gateway_fixtures.py: the gateway's token, scripted profile and the end of its open runs;
tests/sockets.py: `stop_runs`)."""

from __future__ import annotations

import pytest


def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> None:
    """A failing Hypothesis test (test_fuzz.py) has its failing example printed; the patch
    Hypothesis would also write with libcst (mutmut brings it) crashes pytest with an
    INTERNALERROR under the libcst installed here, hiding the failure: no patch."""
    item.__dict__.pop("_hypothesis_failing_examples", None)
