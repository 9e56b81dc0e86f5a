"""`manage.py attach`'s side of the gateway: a client of a running server, over HTTP, with a
token of scope `gateway` — like any outside program, never a database of its own.

It opens a session (record, replay or fork: POST /gateway/sessions), runs the user's program
with the session's base URL and the token in the variables every OpenAI-compatible client
reads, passes the program's output and exit status on, says the program ended (POST …/end),
and prints the run, and for a replay or fork where it first left the record and the diff.
Only the standard library: it must work wherever the program does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

DEFAULT_SERVER = "http://127.0.0.1:8000"
REQUEST_TIMEOUT_S = 30.0
GRACE_S = 5.0  # after Ctrl-C, the program's time to finish before it is terminated
PREFIX = "agentlab:"
NOT_STARTED = 127  # a shell's status for a command it cannot run


class LaunchError(Exception):
    """Why the launcher cannot go on (the server refused, is away, the program won't start)."""


class Server:
    """The gateway's session calls on one server, as one user (their token)."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url.rstrip("/")
        self.token = token

    def call(self, method: str, path: str, body: Any = None, *,
             timeout: float = REQUEST_TIMEOUT_S) -> tuple[int, Any]:
        """(status, decoded JSON or None); an HTTP error or no answer raises LaunchError."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.url + path, data=data, method=method,
            headers={"Authorization": f"Bearer {self.token}", "Accept": "application/json",
                     "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            raise LaunchError(f"{self.url} answered {exc.code}: {_message(exc.read())}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise LaunchError(f"cannot reach {self.url} ({reason})") from None
        return status, json.loads(raw) if raw else None

    def open(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        return self.call("POST", "/gateway/sessions", dict(fields))[1]

    def end(self, key: str, exit_code: int | None) -> dict[str, Any]:
        return self.call("POST", f"/gateway/sessions/{key}/end", {"exit_code": exit_code})[1]

    def next_job(self, wait: float) -> dict[str, Any] | None:
        """A replay or fork asked for from a run page, or None after `wait` seconds."""
        status, body = self.call("GET", f"/gateway/runner/next?wait={wait:g}",
                                 timeout=wait + REQUEST_TIMEOUT_S)
        return body if status == 200 else None


def _message(raw: bytes) -> str:
    try:
        error = json.loads(raw).get("error")
        return str(error.get("message") if isinstance(error, dict) else error)
    except (ValueError, AttributeError):
        return raw[:200].decode(errors="replace") or "(no body)"


def session_fields(*, name: str, replay: int | None = None, fork: int | None = None,
                   at: int | None = None, observation: str | None = None,
                   response: str | None = None, tool_calls: list[Any] | None = None,
                   on_divergence: str = "live",
                   break_tools: Sequence[str] = (), step: bool = False) -> dict[str, Any]:
    """The body of POST /gateway/sessions from the command's options."""
    fields: dict[str, Any] = {"name": name, "on_divergence": on_divergence}
    if fork is not None:
        edit: dict[str, Any] = {}
        if observation is not None:
            edit = {"observation": observation}
        elif response is not None or tool_calls:
            edit = {"response": {"text": response or ""}}
            if tool_calls:
                edit["response"]["tool_calls"] = tool_calls
        fields |= {"mode": "fork", "source": fork, "fork_seq": at, "edit": edit}
    elif replay is not None:
        fields |= {"mode": "replay", "source": replay}
    if break_tools or step:
        fields["debug"] = {"step_mode": step, "break_tools": list(break_tools)}
    return fields


def child_env(env: Mapping[str, str], base_url: str, token: str) -> dict[str, str]:
    """The program's environment: the session's base URL and the token where the openai SDK
    (and clients built on it) look, OPENAI_API_BASE for older ones."""
    return {**env, "OPENAI_BASE_URL": base_url, "OPENAI_API_BASE": base_url,
            "OPENAI_API_KEY": token}


def exit_status(returncode: int) -> int:
    """A shell's view of it: killed by signal N reads 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def run_program(argv: Sequence[str], env: Mapping[str, str]) -> tuple[int, bool]:
    """Run `argv` (its output goes straight to ours) until it exits: (status, interrupted).
    Ctrl-C: the terminal interrupts the program too; one that does not stop is interrupted,
    then terminated, so the session still ends with a status."""
    try:
        child = subprocess.Popen(list(argv), env=dict(env))
    except OSError as exc:
        raise LaunchError(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None
    try:
        return exit_status(child.wait()), False
    except KeyboardInterrupt:
        return _stop(child), True


def _stop(child: subprocess.Popen[bytes]) -> int:
    """After Ctrl-C: let the program finish (the terminal interrupted it too), else
    interrupt it, terminate it, kill it — a moment's wait after each."""
    for act in (None, lambda: child.send_signal(signal.SIGINT), child.terminate, child.kill):
        if act is not None:
            act()
        try:
            return exit_status(child.wait(timeout=GRACE_S / 3))
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            continue
    return exit_status(child.wait())


def run_in_session(server: Server, session: dict[str, Any], argv: Sequence[str],
                   out: TextIO) -> tuple[int, bool]:
    """Run the program in an open session, then end it and say where its run is."""
    out.write(f"{PREFIX} {session['mode']} session {session['session'][:8]}… — "
              f"OPENAI_BASE_URL={session['base_url']}\n")
    out.flush()
    try:
        code, interrupted = run_program(argv, child_env(os.environ, session["base_url"],
                                                         server.token))
    except LaunchError as exc:  # the session still ends, as a shell's "not found" would
        out.write(f"{PREFIX} {exc}\n")
        code, interrupted = NOT_STARTED, False
    for line in summary(server.end(session["session"], code), server.url, code):
        out.write(f"{PREFIX} {line}\n")
    out.flush()
    return code, interrupted


def attach(server: Server, argv: Sequence[str], fields: Mapping[str, Any],
           out: TextIO = sys.stderr) -> int:
    """`manage.py attach [options] -- program…`: the program's exit status."""
    code, interrupted = run_in_session(server, server.open(fields), argv, out)
    return 130 if interrupted and code == 0 else code


def summary(state: Mapping[str, Any], server_url: str, code: int) -> list[str]:
    """What the person reads when the program ended: the run, and for a replay or fork where
    the program first asked something the record did not hold, and the diff."""
    lines = [f"the program exited with status {code}."]
    run = state.get("run")
    if run is None:
        return [*lines, "it made no model call through the gateway: nothing was recorded."]
    lines.append(f"run {run} ({state.get('status', '?')}): {state.get('run_url')}")
    source = state.get("source")
    if state.get("mode") == "record" or source is None:
        return lines
    divergence = state.get("first_divergence")
    if divergence:
        recorded = divergence.get("source_seq")
        lines.append(f"first divergence at step {divergence.get('seq')}"
                     f"{f' (recorded step {recorded})' if recorded else ''}: "
                     f"{divergence.get('detail')}")
    elif state.get("mode") == "replay":
        lines.append("followed the record: no request differed from it.")
    lines.append(f"diff with run {source}: {server_url}/runs/diff/?a={source}&b={run}")
    return lines
