"""`manage.py attach --serve -- program… {question}`: the person's runner in their terminal.

A run page's "Replay" and "Fork from here" on a gateway run only ask (a session waiting for
a runner); this loop, started by the person with their own token and their own program,
takes those requests one at a time (GET /gateway/runner/next, a long poll) and runs the
program in each session with the run's question as one argument — never through a shell, so
nothing in a question is ever a command. The server itself never runs anyone's program.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TextIO

from agentlab.gateway.launcher import PREFIX, LaunchError, Server, run_in_session

PLACEHOLDER = "{question}"
POLL_WAIT_S = 25.0
RETRY_S = 5.0  # the server is away: ask again after this


def with_question(template: Sequence[str], question: str) -> list[str]:
    """The command for one job: {question} replaced in each argument, which stays one
    argument whatever the question holds (spaces, quotes, `; rm -rf`)."""
    return [part.replace(PLACEHOLDER, question) for part in template]


def serve(server: Server, template: Sequence[str], out: TextIO, *,
          wait: float = POLL_WAIT_S, sleep: Callable[[float], None] = time.sleep) -> int:
    """Take jobs until Ctrl-C; 0 when stopped so."""
    if not any(PLACEHOLDER in part for part in template):
        out.write(f"{PREFIX} note: the command has no {PLACEHOLDER}; each job runs it as is.\n")
    out.write(f"{PREFIX} runner listening on {server.url} for replays and forks asked for "
              "from your run pages (Ctrl-C stops).\n")
    out.flush()
    try:
        while True:
            try:
                job = server.next_job(wait)
                if job is None:
                    continue
                out.write(f"{PREFIX} job: {describe(job)}\n")
                _code, interrupted = run_in_session(
                    server, job, with_question(template, job.get("question") or ""), out)
            except LaunchError as exc:
                out.write(f"{PREFIX} {exc}; asking again in {RETRY_S:g} s.\n")
                out.flush()
                sleep(RETRY_S)
                continue
            if interrupted:
                break
    except KeyboardInterrupt:
        pass
    out.write(f"{PREFIX} runner stopped.\n")
    out.flush()
    return 0


def describe(job: dict) -> str:
    if job.get("mode") == "fork":
        return f"fork of run {job.get('source')} at step {job.get('fork_seq')}"
    return f"{job.get('mode')} of run {job.get('source')}"
