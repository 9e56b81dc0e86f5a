"""The long-run figures of `manage.py bench_traces` (issue 37): jump, search, the web process's
memory and the page in Chromium, on a generated run.

Server times come from django.test.Client in the bench's process; memory and the browser from a
real web process (daphne, as `scripts/run` serves) on the same database: its resident memory
when idle, and its peak while it serves the run page, jumps and searches. The browser is Debian's
Chromium through Playwright, as the browser tests use it; without it that figure is skipped.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.urls import reverse

from traces.owners import end_process

CHROMIUM = Path("/usr/bin/chromium")
SEARCHES = {"text": {"q": "zebra"}, "kind": {"kind": "error"},
            "tool name": {"name": "sql_query", "kind": "tool"}, "status": {"status": "error"}}


def server_figures(get: Callable[[str], float], run_id: int, last: int) -> dict[str, float]:
    """Seconds of each, best of 3 after a warm-up: a link to a step 3/4 into the run, the
    replay's far jump (its page of steps), each search (a word found nowhere: the longest)."""
    step = max(1, last * 3 // 4)
    urls = {"jump: ?step=": f"{reverse('run', args=[run_id])}?step={step}",
            "jump: replay": f"{reverse('run_steps', args=[run_id])}?around={step // 2 or 1}"}
    find = reverse("run_find", args=[run_id])
    for name, query in SEARCHES.items():
        urls[f"search: {name}"] = find + "?" + "&".join(f"{k}={v}" for k, v in query.items())
    figures = {}
    for name, url in urls.items():
        get(url)
        figures[name] = min(get(url) for _ in range(3))
    return figures


def web_figures(session: str, run_id: int, last: int, shots: str | None) -> dict[str, Any]:
    """daphne's idle and peak memory (MB) while serving the run, and Chromium's times (s)."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        database = f"sqlite:///{db['NAME']}"
    else:
        database = os.environ.get("DATABASE_URL", "")
    env = {**os.environ, "DATABASE_URL": database, "ALLOWED_HOSTS": "127.0.0.1,localhost",
           "DJANGO_SETTINGS_MODULE": "agentlab.settings"}
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    with (Path(tempfile.gettempdir()) / f"bench-daphne-{port}.log").open("w") as log:
        process = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p",
                                    str(port), "agentlab.asgi:application"],
                                   cwd=settings.BASE_DIR, env=env, stdout=log,
                                   stderr=subprocess.STDOUT)
    try:
        _wait_up(base + "/healthz", process)
        cookie = f"{settings.SESSION_COOKIE_NAME}={session}"
        _fetch(base + reverse("runs"), cookie)  # a first page: templates, startup checks
        idle = _rss_mb(process.pid, "VmRSS")
        figures: dict[str, Any] = {"idle MB": idle}
        step = max(1, last * 3 // 4)
        paths = [reverse("run", args=[run_id]), f"{reverse('run', args=[run_id])}?step={step}",
                 f"{reverse('run_steps', args=[run_id])}?around={step // 3 or 1}",
                 f"{reverse('run_steps', args=[run_id])}?before={step}",
                 reverse("run_timeline", args=[run_id])]
        paths += [reverse("run_find", args=[run_id]) + "?" + "&".join(
            f"{k}={v}" for k, v in q.items()) for q in SEARCHES.values()]
        for _ in range(3):
            for path in paths:
                _fetch(base + path, cookie)
        figures["peak over idle MB"] = _rss_mb(process.pid, "VmHWM") - idle
        if CHROMIUM.exists():
            figures.update(_browser(base, session, run_id, last, shots))
        return figures
    finally:
        end_process(process)


def _browser(base: str, session: str, run_id: int, last: int,
             shots: str | None) -> dict[str, float]:
    """Seconds from navigation to usable (the step marked in the tree, the timeline's bars,
    the slider on it), then a far jump (End) and a search, in Chromium."""
    from playwright.sync_api import sync_playwright

    figures = {}
    step = max(1, last * 3 // 4)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                     args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session,
                                  "url": base}])
            page = context.new_page()
            url = f"{base}{reverse('run', args=[run_id])}?step={step}"
            page.goto(url)  # a first visit: the browser's cache of scripts and styles
            best = float("inf")
            for _ in range(3):
                started = time.perf_counter()
                page.goto(url, wait_until="commit")
                page.locator(f"#step-{step}.current").wait_for()
                page.locator(".waterfall .bar").first.wait_for()
                if page.locator(".waterfall .bar[data-upto]").count():  # a bucket: it is marked
                    page.locator(".waterfall .bar.current").wait_for()
                page.wait_for_function(f"document.getElementById('replay-slider').value"
                                       f" === '{step}'")
                best = min(best, time.perf_counter() - started)
            figures["browser: usable"] = best
            started = time.perf_counter()
            page.keyboard.press("End")
            page.locator(f"#step-{last}.current").wait_for()
            figures["browser: jump to the end"] = time.perf_counter() - started
            started = time.perf_counter()
            page.locator("#find-form select[name=status]").select_option("error")
            page.locator("#find-form button[type=submit]").click()
            page.locator("#find-results .find-list li").first.wait_for()
            figures["browser: search"] = time.perf_counter() - started
            if shots:
                _shoot(browser, base, session, url, step, Path(shots))
        finally:
            browser.close()
    return figures


def _shoot(browser: Any, base: str, session: str, url: str, step: int, out: Path) -> None:
    """The long run's page at desktop and phone width, as the tour shoots pages."""
    out.mkdir(parents=True, exist_ok=True)
    for name, size in (("desktop", {"width": 1400, "height": 900}),
                       ("phone", {"width": 390, "height": 844})):
        context = browser.new_context(viewport=size)
        context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session,
                              "url": base}])
        page = context.new_page()
        page.goto(url)
        page.locator(f"#step-{step}.current").wait_for()
        page.locator(".waterfall .bar").first.wait_for()
        page.wait_for_timeout(300)  # the replay scrolls the step to the middle
        page.screenshot(path=str(out / f"long-run-{name}-step.png"))
        page.locator("#timeline").scroll_into_view_if_needed()
        page.evaluate("document.getElementById('timeline').scrollIntoView()")
        page.screenshot(path=str(out / f"long-run-{name}-timeline.png"))
        context.close()


FIRST_BYTE_GOAL_MS, RATIO_GOAL, JUMP_GOAL_MS, SEARCH_GOAL_MS = 300, 2.0, 300, 500
MEMORY_GOAL_MB, USABLE_GOAL_S = 200, 1.0


def report(out: Callable[[str], Any], pages: list[tuple[int, float, float, int]],
           long: dict[str, Any]) -> None:
    """The long run's figures, each with its goal (issue 37)."""
    n = long["steps"]
    out(f"Long run ({n:,} steps; server times: best of 3 after a warm-up)")
    for name, value in long.items():
        if name.startswith(("jump", "search")):
            out(f"  {name:<20} {value * 1000:>7.0f} ms")
    if "idle MB" in long:
        out(f"  web process (daphne): {long['idle MB']:.0f} MB idle, "
            f"+{long['peak over idle MB']:.0f} MB at its peak serving the run 3 times over")
    for name in ("browser: usable", "browser: jump to the end", "browser: search"):
        if name in long:
            out(f"  {name:<26} {long[name] * 1000:>7.0f} ms (Chromium, Playwright)")
    out("Goals (issue 37)")
    by_size = {p[0]: p[1] for p in pages}
    largest, smallest = max(by_size), min(by_size)
    first = by_size[largest] * 1000
    out(_goal(f"{largest:,}-step page first byte < {FIRST_BYTE_GOAL_MS} ms", f"{first:.0f} ms",
              first < FIRST_BYTE_GOAL_MS))
    if largest > smallest:
        ratio = by_size[largest] / by_size[smallest]
        out(_goal(f"first byte {largest:,} / {smallest:,} < {RATIO_GOAL:g}", f"{ratio:.2f}",
                  ratio < RATIO_GOAL))
    jump = max(v for k, v in long.items() if k.startswith("jump")) * 1000
    out(_goal(f"jump to a step < {JUMP_GOAL_MS} ms (slowest way)", f"{jump:.0f} ms",
              jump < JUMP_GOAL_MS))
    search = max(v for k, v in long.items() if k.startswith("search")) * 1000
    out(_goal(f"search < {SEARCH_GOAL_MS} ms (slowest kind)", f"{search:.0f} ms",
              search < SEARCH_GOAL_MS))
    if "peak over idle MB" in long:
        grew = long["peak over idle MB"]
        out(_goal(f"web process < {MEMORY_GOAL_MB} MB over idle", f"+{grew:.0f} MB",
                  grew < MEMORY_GOAL_MB))
    if "browser: usable" in long:
        usable = long["browser: usable"]
        out(_goal(f"usable in Chromium < {USABLE_GOAL_S:g} s", f"{usable * 1000:.0f} ms",
                  usable < USABLE_GOAL_S))
    elif "idle MB" in long:
        out(f"  usable in Chromium: not measured ({CHROMIUM} is missing)")


def _goal(label: str, figure: str, met: bool) -> str:
    return f"  {label}: {figure} — {'met' if met else 'NOT met'}"


def _fetch(url: str, cookie: str) -> None:
    request = urllib.request.Request(url, headers={"Cookie": cookie, "HX-Request": "true"})
    with urllib.request.urlopen(request, timeout=60) as response:
        response.read()


def _wait_up(url: str, process: subprocess.Popen, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"daphne exited ({process.returncode})")
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("daphne did not answer")


def _rss_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
