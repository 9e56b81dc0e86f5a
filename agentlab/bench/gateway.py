"""The endpoints `manage.py bench_gateway` calls, all in front of one scripted server.

- the scripted server itself (`python -m agentlab.bench.stack llm`, its own process): the
  direct call, the baseline every added latency is measured from. Two of them: `MODEL` answers
  at once, `PACED` after a model's time (the concurrent clients' level: agents that wait on
  their model, as real ones do, rather than a machine saturated by an instant one);
- Agent Lab's gateway: one daphne on a throw-away state folder (SQLite), a user with a gateway
  token and a model profile per model name whose base URL is its scripted server (`prepare`,
  run in that folder); recording as configured by default (every call an `llm` step);
- LiteLLM's proxy (`litellm[proxy]`, requirements-litellm.txt) in its own virtualenv, with a
  config that maps both names to the same servers and a master key (both proxies check a key).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentlab.bench.cluster import Cluster, children, process_cpu_ms, spawn, start_processes
from agentlab.bench.cluster import wait_for as _wait_for
from agentlab.bench.servers import free_port
from traces.owners import end_process

MODEL = "bench-model"
PACED = "bench-model-paced"
UPSTREAM_KEY = "bench-upstream-key"  # the scripted server reads no key
LITELLM_KEY = "sk-bench-master-key"
_ROOT = Path(__file__).resolve().parents[2]
_PIN = re.search(r"^litellm(?:\[proxy\])?==(\S+)",
                 (_ROOT / "requirements-litellm.txt").read_text(), re.M)
LITELLM_VERSION = _PIN.group(1) if _PIN else "?"
LITELLM_INSTALL = 'source scripts/lib.sh && ensure_litellm "$(find_python)"'


def litellm_python() -> Path:
    """AGENTLAB_LITELLM_PYTHON, else the virtualenv scripts/lib.sh ensure_litellm makes (under
    AGENTLAB_LITELLM_CACHE as there); it may not exist."""
    if explicit := os.environ.get("AGENTLAB_LITELLM_PYTHON"):
        return Path(explicit)
    cache = os.environ.get("AGENTLAB_LITELLM_CACHE") or Path.home() / ".cache" / "agentlab"
    return Path(cache) / f"litellm-{LITELLM_VERSION}" / "bin" / "python"


@dataclass
class Endpoint:
    """What a client needs to call one target, and the processes whose CPU it costs."""

    name: str
    base_url: str
    api_key: str
    pid: int = 0  # 0: nothing but the scripted server (its CPU is in every target's)
    model: str = MODEL

    def cpu_ms(self) -> float:
        if not self.pid:
            return 0.0
        return sum(process_cpu_ms(p) or 0.0 for p in (self.pid, *children(self.pid)))


def start_upstream(stack: ExitStack, folder: Path, env: dict[str, str], model: str = MODEL,
                   delay_ms: float = 0) -> Endpoint:
    """A scripted server: every call answered with a short text (streamed: SSE), at once or
    after `delay_ms`."""
    port_file = folder / f"{model}.port"
    proc = spawn(stack, [sys.executable, "-m", "agentlab.bench.stack", "llm", str(port_file),
                         "0", str(delay_ms / 1000)], env)
    port = _wait_for(lambda: port_file.exists() and port_file.read_text(),
                     "the scripted server", 20, proc)
    return Endpoint("direct", f"http://127.0.0.1:{port}/v1", UPSTREAM_KEY, model=model)


def start_gateway(stack: ExitStack, env: dict[str, str], upstreams: list[Endpoint]
                  ) -> Endpoint:
    """Migrate, prepare (in its own process: this one's Django is not the bench's folder's),
    then one daphne; ready once the gateway lists the models for the token."""
    routes = json.dumps({u.model: u.base_url for u in upstreams})
    # The rate a user may send (6,000/min by default) is not what is measured: one client
    # alone calls faster. It is still checked on every request; the cap on requests at once
    # (64) stays, above the 50 clients.
    env = {**env, "AGENTLAB_GATEWAY_REQUESTS_PER_MIN": "0"}
    done = subprocess.run([sys.executable, "-m", "agentlab.bench.gateway", "prepare", routes],
                          env=env, capture_output=True, text=True, timeout=300, cwd=str(_ROOT))
    if done.returncode:
        raise RuntimeError(f"preparing Agent Lab failed:\n{done.stderr[-2000:]}")
    token = json.loads(done.stdout.strip().splitlines()[-1])["token"]
    cluster = Cluster("web", web=1, env=env)
    start_processes(cluster, stack)
    base = f"http://127.0.0.1:{cluster.ports[0]}/gateway/v1"
    listed = models(base, token)
    if any(u.model not in listed for u in upstreams):
        raise RuntimeError(f"the gateway at {base} does not list the bench's models: {listed}")
    return Endpoint("Agent Lab", base, token, cluster.app_pids[0])


def models(base: str, key: str) -> list[str]:
    request = urllib.request.Request(base + "/models",
                                     headers={"Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return [m["id"] for m in json.load(response)["data"]]
    except urllib.error.HTTPError as exc:
        raise RuntimeError(f"GET {base}/models answered {exc.code}: "
                           f"{exc.read()[:300].decode(errors='replace')}") from None


def start_litellm(stack: ExitStack, folder: Path, python: Path, upstreams: list[Endpoint],
                  timeout: float = 180) -> Endpoint:
    """LiteLLM's proxy, one process (its default of one worker), no database: its own
    defaults, with a master key so that it checks a key as the gateway does."""
    config = folder / "litellm.yaml"  # JSON is YAML
    config.write_text(json.dumps({
        "model_list": [{"model_name": u.model, "litellm_params": {
            "model": f"openai/{u.model}", "api_base": u.base_url,
            "api_key": UPSTREAM_KEY}} for u in upstreams],
        "general_settings": {"master_key": LITELLM_KEY},
    }))
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DJANGO_", "AGENTLAB_", "DATABASE_URL", "REDIS_", "OPENAI_"))}
    # No network here or in CI: the packaged cost map, not a download at start.
    env |= {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR"}
    log = (folder / "litellm.log").open("wb")
    stack.callback(log.close)
    litellm = Path(python).parent / "litellm"
    proc = subprocess.Popen([str(litellm), "--config", str(config), "--host", "127.0.0.1",
                             "--port", str(port), "--num_workers", "1"],
                            env=env, cwd=str(folder), stdout=log, stderr=subprocess.STDOUT)

    stack.callback(end_process, proc, 20)  # only the process this bench started
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            tail = (folder / "litellm.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"LiteLLM exited with {proc.returncode}:\n{tail}")
        try:
            listed = models(base + "/v1", LITELLM_KEY)
            if all(u.model in listed for u in upstreams):
                return Endpoint(f"LiteLLM {LITELLM_VERSION}", base + "/v1", LITELLM_KEY,
                                proc.pid)
        except (OSError, RuntimeError, ValueError, KeyError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"LiteLLM did not answer within {timeout:g} s")
        time.sleep(0.5)


def recorded(database: Path) -> tuple[int, int]:
    """(llm steps, runs) in the gateway's database: what recording wrote."""
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30) as db:
        steps = db.execute("SELECT count(*) FROM traces_step WHERE kind = 'llm'").fetchone()[0]
        runs = db.execute("SELECT count(*) FROM traces_run").fetchone()[0]
    return int(steps), int(runs)


def settled(database: Path, want: int, timeout: float) -> tuple[int, int]:
    """The counts once `want` llm steps are written, or once they stop growing."""
    last, still_since = (-1, -1), time.monotonic()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = recorded(database)
        if now[0] >= want:
            return now
        if now != last:
            last, still_since = now, time.monotonic()
        elif time.monotonic() - still_since > 3:
            break
        time.sleep(0.2)
    return recorded(database)


def prepare(routes: dict[str, str]) -> dict[str, Any]:
    """In a fresh state folder: migrate, a user, a gateway token and a model profile per model
    name (`routes`: name -> the scripted server's base URL)."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentlab.settings")
    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from agentlab.models import ModelProfile
    from agentlab.tokens.models import create_token

    call_command("migrate", verbosity=0, interactive=False)
    user = User.objects.create_user("bench", password=None)
    for name, url in routes.items():
        ModelProfile.objects.create(name=name, base_url=url, model=name, retries=0,
                                    timeout_s=30)
    _row, token = create_token(user, name="bench_gateway", scope="gateway")
    return {"token": token}


if __name__ == "__main__":
    if sys.argv[1:2] == ["prepare"] and len(sys.argv) == 3:
        print(json.dumps(prepare(json.loads(sys.argv[2]))))
    else:
        sys.exit("usage: python -m agentlab.bench.gateway prepare "
                 "'{\"MODEL\": \"UPSTREAM_URL\", …}'")
