"""Fixtures for browser tests: `live_url` (daphne serving the test database) and `page`
(Playwright's Chromium, logged in through the login form as the `user` fixture, alice).

- The test database is a file (settings: DATABASES TEST NAME under AGENTLAB_VAR_DIR), so a
  separate daphne process can read what a test wrote; tests get `transactional_db` (data is
  committed, tables are flushed afterwards).
- daphne is the real ASGI server (HTTP and WebSocket), started once per session on a free port.
- Chromium is Debian's, never a downloaded one. Without /usr/bin/chromium the tests are skipped,
  except when AGENTLAB_BROWSER_TESTS=1 (CI): then they fail, so a missing browser is noticed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentlab.bench.servers import free_port
from traces.owners import end_process

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
START_TIMEOUT_S = 60
DEFAULT_TIMEOUT_MS = 15_000


def _require_browser() -> None:
    missing = None
    if not CHROMIUM.exists():
        missing = f"{CHROMIUM} is missing (apt-get install chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            missing = "the playwright package is not installed (requirements-dev.txt)"
    if missing is None:
        return
    if os.environ.get("AGENTLAB_BROWSER_TESTS") == "1":
        pytest.fail(f"browser tests must run here (AGENTLAB_BROWSER_TESTS=1) but {missing}")
    pytest.skip(f"browser tests skipped: {missing}")



def _wait_until_up(url: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"daphne exited with {process.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"daphne did not answer within {START_TIMEOUT_S} s:\n{log.read_text()}")


def start_daphne(env: dict[str, str], log: Path) -> tuple[str, subprocess.Popen]:
    """daphne serving the app on a free port, answering before this returns; its output goes
    to `log`."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
             "agentlab.asgi:application"],
            cwd=Path(__file__).resolve().parents[1], env=env, stdout=out,
            stderr=subprocess.STDOUT)
    try:
        _wait_until_up(url, process, log)
    except BaseException:
        process.kill()
        raise
    return url, process


def run_once_in_step_mode(page, base_url: str, agent: str = "Calc agent",
                          question: str = "What is 6*7?"):
    """From the chat page: a one-off run of `agent`, started in step mode; its pending box."""
    page.goto(f"{base_url}/chat/")
    page.get_by_label(f"Question for {agent}").fill(question)
    page.locator("form.run-once").get_by_label("step mode").check()
    page.get_by_role("button", name=f"Run {agent}").click()
    return page.locator('[data-live="pending"]')


@pytest.fixture(scope="session")
def live_server_url(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[str]:
    """daphne in its own process, on the session's test database (a file)."""
    from django.db import connection

    with django_db_blocker.unblock():
        name = connection.settings_dict["NAME"]
        vendor = connection.vendor
    if vendor != "sqlite" or "memory" in str(name):
        pytest.skip(f"a live server needs a file database to share, not {vendor} {name!r}")
    log = tmp_path_factory.mktemp("daphne") / "daphne.log"
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{name}",
           "ALLOWED_HOSTS": "127.0.0.1,localhost", "DJANGO_SETTINGS_MODULE": "agentlab.settings"}
    url, process = start_daphne(env, log)
    try:
        yield url
    finally:
        end_process(process)


@pytest.fixture
def live_url(live_server_url, transactional_db) -> str:
    """The live server's base URL ("http://127.0.0.1:PORT", no trailing slash); what the test
    writes to the database is committed, so the server sees it."""
    return live_server_url


@pytest.fixture(scope="module")
def playwright_browser() -> Iterator[object]:
    """Playwright's Chromium (Debian's binary), one per test module.

    Playwright's sync API runs an event loop in this thread while it is alive, which Django
    would take for async code calling the ORM; the tests' own ORM calls are synchronous, so
    that check is switched off for the module only."""
    _require_browser()
    from playwright.sync_api import sync_playwright

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                         args=CHROMIUM_ARGS)
            try:
                yield browser
            finally:
                browser.close()


@pytest.fixture
def browser_page(playwright_browser, tmp_path, request) -> Iterator[object]:
    """A fresh, logged-out page in its own browser context (no cookies or storage shared).
    `page.js_errors` collects uncaught script errors, console errors and failed requests
    (HTTP >= 400, the favicon included: every page names one)."""
    context = playwright_browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(DEFAULT_TIMEOUT_MS)
    page = context.new_page()
    page.js_errors = []
    page.on("pageerror", lambda error: page.js_errors.append(str(error)))
    page.on("console", lambda msg: _console_error(page, msg))
    page.on("response", lambda response: _failed_response(page, response))
    try:
        yield page
    finally:
        context.close()
    # Every page must run clean: no script error, no Content-Security-Policy violation (the
    # console reports them as errors), no failed request — unless the test provokes them.
    if not request.node.get_closest_marker("allow_js_errors"):
        assert not page.js_errors, page.js_errors


def _console_error(page, message) -> None:
    # A failed load is reported with its URL by _failed_response instead.
    if message.type == "error" and not message.text.startswith("Failed to load resource"):
        page.js_errors.append(message.text)


def _failed_response(page, response) -> None:
    if response.status >= 400:
        page.js_errors.append(f"HTTP {response.status} {response.url}")


def log_in(page, live_url: str, username: str, password: str) -> None:
    """Log in through the real login form, as a person would."""
    page.goto(f"{live_url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)


@pytest.fixture
def page(browser_page, live_url, user) -> object:
    """A page logged in as alice (the `user` fixture)."""
    log_in(browser_page, live_url, "alice", "pw-alice-123")
    return browser_page


# ---------------------------------------------------------------------------- the tour

SIZES = {"desktop": (1400, 900), "phone": (390, 844)}


class Tour:
    """Screenshots of pages at desktop and phone width, each checked as the tour checks it: a
    heading, nothing wider than the window (tests/browser/test_tour.py)."""

    def __init__(self, page, base: str, out: Path) -> None:
        self.page, self.base, self.out, self.n = page, base, out, 0
        self.problems: list[str] = []  # said at the end, after every screenshot is taken

    def shoot(self, name: str, path: str | None = None) -> None:
        """Both sizes of the page at `path` (or the page as it is), checked and saved."""
        page = self.page
        if path is not None:
            page.goto(self.base + path)
        self.n += 1
        for size, (width, height) in SIZES.items():
            page.set_viewport_size({"width": width, "height": height})
            page.wait_for_timeout(150)  # charts and layout settle
            if not page.locator("h1:visible, #site-name:visible").count():
                self.problems.append(f"{name} at {size}: no heading")
            wide = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            if wide > 1:
                self.problems.append(f"{name} at {size}: {wide}px wider than the window")
            page.screenshot(path=str(self.out / f"{self.n:02d}-{name}-{size}.png"),
                            full_page=True)
        page.set_viewport_size({"width": 1400, "height": 900})
