"""`manage.py serve`: the embedded model and daphne together, stopped together."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from agentlab.llm.local_server import LocalModelError, LocalModelServer
from agentlab.paths import var_dir


class Command(BaseCommand):
    help = "Start the embedded local model (unless --no-model) and the daphne web server."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--model-port", type=int,
                            default=int(os.environ.get("AGENTLAB_LOCAL_LLM_PORT", 8766)))
        parser.add_argument("--no-model", action="store_true",
                            help="Don't start the embedded model (profiles point elsewhere).")

    def handle(self, *args: Any, host: str, port: int, model_port: int, no_model: bool,
               **options: Any) -> None:
        env = os.environ.copy()
        server = None
        if not no_model:
            self.stdout.write("• Starting the embedded model (SmolLM2-135M-Instruct)…")
            server = LocalModelServer(port=model_port, log_path=var_dir() / "local_llm.log")
            try:
                url = server.start()
            except LocalModelError as exc:
                raise CommandError(str(exc)) from None
            env["AGENTLAB_LOCAL_LLM_URL"] = url
            self.stdout.write(f"  model ready at {url}")
        from agentlab.code_agents.rows import sync_all

        # agents.py edited since the last migrate: Chat and Compare offer them now.
        for problem in sync_all()[1]:
            self.stdout.write(self.style.WARNING(f"• Agent defined in code not synced: {problem}"))
        from traces.startup import sweep

        # daphne sweeps again at its first request (it is another process): a no-op then.
        counts = sweep()
        if n := counts.get("runs"):
            self.stdout.write(f"• Marked {n} run(s) left by a stopped process as interrupted")
        if n := counts.get("experiments"):
            self.stdout.write(f"• Marked {n} experiment(s) left by a stopped process as "
                              "interrupted")
        if n := counts.get("imports"):
            self.stdout.write(f"• Removed {n} import(s) left half-written by a stopped process")
        if server is not None:
            from agentlab.management.commandutil import warm_agents
            from agentlab.models import Agent

            # The ReAct agents (what Chat offers first) have read their prompts before the
            # first question: it costs its own words, not ~500 tokens of prompt.
            self.stdout.write("• Warming the ReAct agents' prompts on the embedded model…")
            warm_agents(Agent.objects.filter(paradigm="react").select_related("model_profile"),
                        self.stdout)
        self.stdout.write(self.style.SUCCESS(f"• Agent Lab: http://{host}:{port}/  (Ctrl-C stops)"))
        daphne = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", host, "-p", str(port),
             "agentlab.asgi:application"],
            env=env,
        )
        stop = lambda *_: daphne.terminate()  # noqa: E731
        signal.signal(signal.SIGTERM, stop)
        try:
            code = daphne.wait()
        except KeyboardInterrupt:
            daphne.terminate()
            code = daphne.wait()
        finally:
            if server is not None:
                server.stop()
        if code not in (0, -signal.SIGTERM):
            raise CommandError(f"daphne exited with status {code}")
