"""The password hasher of the tests (tests/conftest.py)."""

from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class OneRoundPBKDF2(PBKDF2PasswordHasher):
    """PBKDF2 as production has it, with one iteration instead of over a million: a user made
    by a fixture costs microseconds, not a third of a second. The hash names its own count, so
    the app processes that browser and worker tests start, on the real settings, still accept
    these passwords (they then store them again at full strength, as on any upgrade)."""

    iterations = 1
