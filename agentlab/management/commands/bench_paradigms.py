"""`manage.py bench_paradigms`: run agents on their demo questions and print what each cost.

Every run is a normal recorded run (its trace is under Runs), so a surprising figure can be
opened and read step by step. The table in docs/PARADIGMS.md comes from this command.
"""

from __future__ import annotations

import asyncio
import json
import statistics
from dataclasses import asdict, dataclass
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from agentlab.management.commandutil import find_agent, find_user, needs_embedded, start_embedded
from agentlab.models import Agent


@dataclass
class Row:
    agent: str
    paradigm: str
    question: str
    runs: int
    succeeded: int
    llm_calls: float
    tool_calls: float
    tokens: float
    wall_s: float
    format_errors: float
    answer: str
    run_ids: list[int]


class Command(BaseCommand):
    help = ("Run agents (default: all) on their demo questions, or on --question, and print LLM "
            "calls, tool calls, tokens and wall time per agent.")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("agents", nargs="*", help="Agent names or ids (default: all agents)")
        parser.add_argument("--question", help="Ask every agent this instead of its demo question")
        parser.add_argument("--repeat", type=int, default=1, help="Runs per agent (mean shown)")
        parser.add_argument("--user", help="Record the runs as this user (default: first admin)")
        parser.add_argument("--markdown", action="store_true", help="Print the table as Markdown")
        parser.add_argument("--json", dest="json_path", help="Also write the rows to this file")
        parser.add_argument("--no-model", action="store_true",
                            help="Don't start the embedded model even if it is not running.")

    def handle(self, *args: Any, agents: list[str], question: str | None, repeat: int,
               user: str | None, markdown: bool, json_path: str | None, no_model: bool,
               **options: Any) -> None:
        rows_in = [find_agent(a) for a in agents] or list(
            Agent.objects.select_related("model_profile").order_by("pk"))
        if not rows_in:
            raise CommandError("No agents: run `manage.py setup` first.")
        if repeat < 1:
            raise CommandError("--repeat must be at least 1")
        owner = find_user(user)
        own_server = not no_model and needs_embedded(rows_in)
        rows = []
        for i, agent in enumerate(rows_in, 1):
            # A fresh embedded server per agent: llama.cpp's server cannot interrupt a request,
            # so a run cut off by its timeout would leave it generating into the next agent's
            # time and make that one look slow.
            server = start_embedded(self.stdout) if own_server else None
            try:
                rows.append(self._bench(agent, question, repeat, owner, i, len(rows_in)))
            finally:
                if server is not None:
                    server.stop()
        self.stdout.write("")
        self.stdout.write(render_markdown(rows) if markdown else render_text(rows))
        if json_path:
            with open(json_path, "w", encoding="utf-8") as fh:
                json.dump([asdict(r) for r in rows], fh, indent=2, ensure_ascii=False)
            self.stdout.write(f"rows written to {json_path}")

    def _bench(self, agent: Agent, question: str | None, repeat: int, owner: Any, index: int,
               total: int) -> Row:
        from agentlab.runs.execution import execute_run
        from agentlab.runs.start import start_run

        asked = question or agent.demo_question or "What is 17 * 23?"
        outcomes, ids = [], []
        for attempt in range(1, repeat + 1):
            self.stdout.write(f"[{index}/{total}] {agent.name} ({agent.paradigm}) run "
                              f"{attempt}/{repeat}: {asked}")
            run = start_run(owner, agent, asked, places=0)
            outcome = asyncio.run(execute_run(run))
            t = outcome.totals
            self.stdout.write(f"      {outcome.status} · {t.llm_calls} LLM calls · "
                              f"{t.tool_calls} tool calls · {t.tokens} tokens · "
                              f"{t.wall_ms / 1000:.1f} s · /runs/{run.pk}/")
            outcomes.append(outcome)
            ids.append(run.pk)

        def mean(get: Any) -> float:
            return statistics.fmean(get(o.totals) for o in outcomes)

        return Row(agent=agent.name, paradigm=agent.paradigm, question=asked, runs=repeat,
                   succeeded=sum(o.status == "succeeded" for o in outcomes),
                   llm_calls=mean(lambda t: t.llm_calls), tool_calls=mean(lambda t: t.tool_calls),
                   tokens=mean(lambda t: t.tokens), wall_s=mean(lambda t: t.wall_ms / 1000),
                   format_errors=mean(lambda t: t.format_errors),
                   answer=_clip(outcomes[-1].answer or ""), run_ids=ids)


HEADERS = ["agent", "paradigm", "ok", "LLM calls", "tool calls", "tokens", "wall s",
           "format errors", "answer (last run)"]


def _cells(r: Row) -> list[str]:
    return [r.agent, r.paradigm, f"{r.succeeded}/{r.runs}", f"{r.llm_calls:g}",
            f"{r.tool_calls:g}", f"{r.tokens:.0f}", f"{r.wall_s:.1f}", f"{r.format_errors:g}",
            r.answer]


def render_markdown(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + " --- |" * len(HEADERS)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in _cells(r)) + " |" for r in rows]
    return "\n".join(lines)


def render_text(rows: list[Row]) -> str:
    table = [HEADERS, *(_cells(r) for r in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(HEADERS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in table)


def _clip(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
