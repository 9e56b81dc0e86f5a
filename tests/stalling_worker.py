"""`python -m tests.stalling_worker [--concurrency N]`: `manage.py worker`, plus the tool
`stall_loop`, whose first call in a test blocks the worker's event loop
(tests/test_worker_stall.py).

A stall is what a user's pattern that backtracks, or any blocking code on the loop, does: no
other task of the loop runs meanwhile. `hold_gil` blocks in C with the GIL held, so that no
thread of the process runs either (its heartbeat thread included), as a pattern matched by
the `re` module does. Only the first call made while AGENTLAB_TEST_STALL_MARKER does not exist
stalls (it creates the file, with its pid): a worker taking the run over and calling the tool
again does not stall in its turn.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from pathlib import Path

from agentlab.tools.decorator import tool


@tool
async def stall_loop(seconds: float, hold_gil: bool = False) -> str:
    """Block this process's event loop for `seconds` (the first call of a test only)."""
    try:
        fd = os.open(Path(os.environ["AGENTLAB_TEST_STALL_MARKER"]),
                     os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return "went on at once"
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    if hold_gil:
        ctypes.PyDLL(None).sleep(int(seconds))  # libc's sleep, called with the GIL held
    else:
        time.sleep(seconds)  # on the loop: every task of this worker waits
    return "stalled"


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentlab.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from agentlab.tools.registry import register_tool

    register_tool(stall_loop)
    call_command("worker", *sys.argv[1:])


if __name__ == "__main__":
    main()
