"""`manage.py serve_local_llm`: the embedded model alone, until Ctrl-C or SIGTERM."""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from agentlab.llm.local_server import LocalModelError, LocalModelServer, configured_port


class Command(BaseCommand):
    help = "Serve SmolLM2-135M-Instruct on 127.0.0.1 through llama-cpp-python's OpenAI server."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--port", type=int, default=configured_port(),
                            help="Port (default $AGENTLAB_LOCAL_LLM_PORT or 8766; 0 = any free)")
        parser.add_argument("--n-ctx", type=int, default=4096, help="Context size in tokens")

    def handle(self, *args: Any, port: int, n_ctx: int, **options: Any) -> None:
        server = LocalModelServer(port=port, n_ctx=n_ctx)
        self.stdout.write("Starting the embedded model…")
        try:
            url = server.start()
        except LocalModelError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(self.style.SUCCESS(f"Local model ready at {url}"))
        self.stdout.flush()
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        try:
            while not stop.is_set() and server.process and server.process.poll() is None:
                stop.wait(0.5)
        finally:
            server.stop()
        self.stdout.write("Local model stopped.")
