"""manage.py bench_traces's long-run figures at a tiny size: its own web process (daphne) and
Chromium through Playwright, each figure printed with its goal, and the screenshots. Its own
module: the bench starts Playwright itself, which cannot run beside the `page` fixture's."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command

from tests.browser_fixtures import _require_browser

pytestmark = [pytest.mark.browser]


@pytest.mark.django_db(transaction=True)  # the bench's own web process reads its rows
def test_the_bench_measures_the_long_run_in_a_web_process_and_chromium(capsys, tmp_path):
    _require_browser()
    call_command("bench_traces", "--only", "page", "--sizes", "40,400",
                 "--shots", str(tmp_path))
    out = capsys.readouterr().out
    assert re.search(r"web process \(daphne\): \d+ MB idle, \+\d+ MB at its peak", out), out
    assert re.search(r"usable in Chromium < 1 s: \d+ ms — (met|NOT met)", out)
    assert re.search(r"browser: search\s+\d+ ms", out)
    assert re.search(r"first byte 400 / 40 < 2: [\d.]+ — (met|NOT met)", out)
    assert {p.name for p in tmp_path.iterdir()} == {
        f"long-run-{w}-{v}.png" for w in ("desktop", "phone") for v in ("step", "timeline")}
