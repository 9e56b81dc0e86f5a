"""`manage.py run_agent <agent> "question"`: run an agent in the terminal, step by step."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from django.core.management.base import BaseCommand

from agentlab.management.commandutil import find_agent, find_user, needs_embedded, start_embedded
from traces.display.terminal import TerminalSink
from traces.schema import ANSWERED_STATUSES, RUN_STATUS_MEANINGS


class Command(BaseCommand):
    help = "Run an agent on a question, printing each step as it happens; exit 0 on success."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("agent", help="Agent name (or id)")
        parser.add_argument("question")
        parser.add_argument("--user", help="Record the run as this user (default: first admin)")
        parser.add_argument("--approve", choices=["ask", "all", "none"], default="ask",
                            help="Tools that need approval: ask on the terminal (default when "
                            "interactive), approve all, or deny all.")
        parser.add_argument("--no-model", action="store_true",
                            help="Don't start the embedded model even if it is not running.")

    def handle(self, *args: Any, agent: str, question: str, user: str | None, approve: str,
               no_model: bool, **options: Any) -> None:
        from agentlab.runs.start import start_run

        row = find_agent(agent)
        owner = find_user(user)
        server = None
        if not no_model and needs_embedded([row]):
            server = start_embedded(self.stdout)
        run = start_run(owner, row, question, places=0)  # the operator's: not limited
        self.stdout.write(f"Run {run.pk}: {row.name} ({row.paradigm}) — {question}")
        try:
            outcome = asyncio.run(self._execute(run, approve))
        finally:
            if server is not None:
                server.stop()
        totals = outcome.totals
        style = {"succeeded": self.style.SUCCESS, "stopped": self.style.WARNING}.get(
            outcome.status, self.style.ERROR)
        self.stdout.write(style(f"\n{outcome.status.upper()}: {outcome.answer or ''}"))
        if outcome.status == "stopped":
            self.stdout.write(self.style.WARNING(
                f"({RUN_STATUS_MEANINGS['stopped']}: {outcome.error})"))
        elif outcome.error:
            self.stdout.write(self.style.ERROR(f"error: {outcome.error}"))
        self.stdout.write(
            f"{totals.llm_calls} LLM calls · {totals.tool_calls} tool calls · "
            f"{totals.tokens_in}+{totals.tokens_out} tokens · ${totals.cost_usd:.6f} · "
            f"{totals.wall_ms:.0f} ms · {totals.format_errors} format errors · "
            f"{totals.reflections} reflections · trace: /runs/{run.pk}/"
        )
        if outcome.status not in ANSWERED_STATUSES:
            sys.exit(1)

    async def _execute(self, run: Any, approve: str) -> Any:
        from agentlab.runs.execution import execute_run
        from agentlab.runtime.context import Approval

        interactive = sys.stdin.isatty()

        async def approver(step: Any) -> Approval:
            if approve == "all":
                return Approval(approved=True, reason="approved by --approve all")
            if approve == "none" or not interactive:
                return Approval(approved=False, reason="denied: nobody at the terminal to approve")
            answer = await asyncio.to_thread(input, f"Approve {step.name}({step.input})? [y/N] ")
            ok = answer.strip().lower() in {"y", "yes"}
            return Approval(approved=ok, reason="approved at the terminal" if ok else
                            "denied at the terminal")

        return await execute_run(run, watchers=(TerminalSink(self.stdout._out),),
                                 approver=approver)
