"""Browser tests: real Chromium (Debian's /usr/bin/chromium) through Playwright, against a
daphne live server that shares the test database (see conftest.py)."""
