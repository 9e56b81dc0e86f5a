"""`manage.py serve_local_llm`: the embedded model alone, until Ctrl-C or SIGTERM."""

from __future__ import annotations

import signal
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from agentlab.llm.local_server import LocalModelError, LocalModelServer, configured_port


class _Stop(Exception):
    """Raised by the signal handler, so a signal also interrupts a start in progress."""


def _on_signal(signum: int, _frame: Any) -> None:
    raise _Stop(signal.Signals(signum).name)


class Command(BaseCommand):
    help = "Serve SmolLM2-135M-Instruct on 127.0.0.1 through llama-cpp-python's OpenAI server."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--port", type=int, default=configured_port(),
                            help="Port (default $AGENTLAB_LOCAL_LLM_PORT or 8766; 0 = any free)")
        parser.add_argument("--host", default="127.0.0.1",
                            help="Address to listen on (default 127.0.0.1; 0.0.0.0 in a "
                                 "container that other containers reach: compose.yaml)")
        parser.add_argument("--n-ctx", type=int, default=4096, help="Context size in tokens")
        parser.add_argument("--timeout", type=float, default=180,
                            help="Seconds to wait for the model to load (default 180)")

    def handle(self, *args: Any, port: int, host: str, n_ctx: int, timeout: float,
               **options: Any) -> None:
        server = LocalModelServer(port=port, host=host, n_ctx=n_ctx)
        previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        crashed = False
        try:
            self.stdout.write("Starting the embedded model…")
            url = server.start(timeout_s=timeout)
            self.stdout.write(self.style.SUCCESS(f"Local model ready at {url}"))
            self.stdout.flush()
            while server.running:
                time.sleep(0.5)
            crashed = True
        except _Stop:
            pass
        except LocalModelError as exc:
            raise CommandError(str(exc)) from None
        finally:
            for sig in previous:  # a second Ctrl-C must not interrupt the clean stop
                signal.signal(sig, signal.SIG_IGN)
            tail = server.log_tail() if crashed else ""
            server.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if crashed:
            raise CommandError(f"the embedded model server exited unexpectedly:\n{tail}")
        self.stdout.write("Local model stopped.")
