"""The real Arize Phoenix (requirements-phoenix.txt, its own virtualenv made by scripts/test) on
free loopback ports, for the tests that check against it (test_phoenix, test_feedback_phoenix):
`phoenix` starts one per module. Skipped only when the Phoenix virtualenv does not exist and
AGENTLAB_PHOENIX_PYTHON is unset (scripts/test sets it, so there it always runs)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentlab.bench.servers import free_port
from traces.owners import end_process

# The pin scripts/lib.sh installs (one place for the version).
VERSION = re.search(r"^arize-phoenix==(\S+)", (Path(__file__).parent.parent
                                               / "requirements-phoenix.txt").read_text(),
                    re.M).group(1)
DEFAULT_PYTHON = Path.home() / ".cache" / "agentlab" / f"phoenix-{VERSION}" / "bin" / "python"


def _python() -> Path:
    if explicit := os.environ.get("AGENTLAB_PHOENIX_PYTHON"):
        assert Path(explicit).exists(), f"AGENTLAB_PHOENIX_PYTHON={explicit} does not exist"
        return Path(explicit)
    if not DEFAULT_PYTHON.exists():
        pytest.skip(f"no Phoenix virtualenv at {DEFAULT_PYTHON.parent.parent} "
                    "(scripts/test makes it)")
    return DEFAULT_PYTHON



class Phoenix:
    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=10) as response:
            return json.load(response)

    def raw(self, path: str) -> bytes:
        with urllib.request.urlopen(self.url + path, timeout=10) as response:
            return response.read()

    def spans(self, project: str, want: int, timeout_s: float = 30) -> list[dict[str, Any]]:
        """Every span of `project` (all pages), once at least `want` have been ingested."""
        deadline = time.monotonic() + timeout_s
        while True:
            found, cursor = [], ""
            while True:
                try:
                    page = self.get(f"/v1/projects/{project}/spans?limit=1000{cursor}")
                except urllib.error.HTTPError as exc:  # 404 until its first span is stored
                    if exc.code != 404:
                        raise
                    break
                found += page["data"]
                if not page.get("next_cursor"):
                    break
                cursor = f"&cursor={page['next_cursor']}"
            if len(found) >= want or time.monotonic() > deadline:
                return found
            time.sleep(0.5)


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    python = _python()
    port, grpc = free_port(), free_port()
    workdir = tmp_path_factory.mktemp("phoenix")
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(workdir), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(grpc),
           "PHOENIX_TELEMETRY_ENABLED": "false"}
    for name in [k for k in env if k.startswith(("OTEL_", "DJANGO_", "AGENTLAB_"))]:
        del env[name]
    log = (workdir / "phoenix.log").open("wb")
    process = subprocess.Popen([str(python), "-m", "phoenix.server.main", "serve"], env=env,
                               stdout=log, stderr=subprocess.STDOUT)
    server = Phoenix(port)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, (workdir / "phoenix.log").read_text()[-3000:]
            try:
                server.raw("/healthz")
                break
            except OSError:
                assert time.monotonic() < deadline, "Phoenix did not start in 120 s"
                time.sleep(0.5)
        yield server
    finally:
        end_process(process, 20)
        log.close()
