"""`manage.py run_experiment SUITE AGENT [AGENT…]`: run a suite against agents from the terminal.

The same experiment the experiments page runs: every (case, agent) pair is a normal recorded
run, scored as it ends. A progress bar on a terminal (a line per finished result otherwise),
then the summary table per agent. Ctrl-C cancels the experiment and keeps what finished.
"""

from __future__ import annotations

import asyncio
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from agentlab.evals import runner
from agentlab.evals.models import Result, Suite
from agentlab.evals.summary import agent_summary
from agentlab.management.commandutil import (
    find_agent,
    find_named,
    find_user,
    needs_embedded,
    start_embedded,
    warm_agents,
)
from agentlab.models import ModelProfile
from traces.display.figures import format_percent

BAR = 30


class Command(BaseCommand):
    help = ("Run an evaluation suite against one or more agents and print the mean score, "
            "pass rate, runs, tokens, cost and wall time per agent.")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("suite", help="Suite name or id")
        parser.add_argument("agents", nargs="+", help="Agent names or ids")
        parser.add_argument("--concurrency", type=int, default=2, help="Runs at once (2)")
        parser.add_argument("--user", help="Record the runs as this user (default: first admin)")
        parser.add_argument("--judge", help="Model profile (name or id) for llm_judge cases")
        parser.add_argument("--tag", action="append", default=[], dest="tags",
                            help="Only the cases with this tag (repeat for several: any of "
                                 "them), e.g. --tag knowledge")
        parser.add_argument("--limit", type=int, help="Only the first N cases (of those tagged)")
        parser.add_argument("--run-timeout", type=int, metavar="S",
                            help="Cap every run's total timeout at S seconds (default: each "
                                 "agent's own limit)")
        parser.add_argument("--title", default="", help="A title for the experiment")
        parser.add_argument("--markdown", action="store_true", help="Print the table as Markdown")
        parser.add_argument("--no-model", action="store_true",
                            help="Don't start the embedded model even if it is not running.")

    def handle(self, *args: Any, suite: str, agents: list[str], concurrency: int,
               user: str | None, judge: str | None, limit: int | None, tags: list[str],
               run_timeout: int | None, title: str,
               markdown: bool, no_model: bool, **options: Any) -> None:
        found = find_named(Suite.objects.all(), suite, "suite")
        rows = [find_agent(a) for a in dict.fromkeys(agents)]
        judge_profile = find_named(ModelProfile.objects.all(), judge, "model profile") \
            if judge else None
        if limit is not None and limit < 1:
            raise CommandError("--limit must be at least 1")
        try:
            experiment = runner.create_experiment(
                find_user(user), found, rows, title=title, concurrency=concurrency,
                judge_profile=judge_profile, case_limit=limit, run_timeout_s=run_timeout,
                case_tags=tags)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        done, total = experiment.progress()
        self.stdout.write(f"Experiment {experiment.pk}: suite '{found.name}', {total // len(rows)}"
                          f" case(s) × {len(rows)} agent(s), {concurrency} at a time"
                          + (f", tagged {' or '.join(experiment.case_tags)}"
                             if experiment.case_tags else "")
                          + (f", at most {run_timeout} s per run" if run_timeout else ""))
        server = (start_embedded(self.stdout) if not no_model
                  and needs_embedded(rows, (experiment.judge_profile,)) else None)
        if server is not None:
            warm_agents(rows, self.stdout)
        tty = self.stdout.isatty()
        try:
            experiment = asyncio.run(runner.run_experiment(
                experiment.pk, on_progress=self._bar if tty else None,
                on_result=None if tty else self._line))
        except KeyboardInterrupt:
            runner.cancel_experiment(experiment.pk)
            experiment.refresh_from_db()
            self.stdout.write("\nInterrupted: the experiment is cancelled; finished results "
                              "are kept.")
        finally:
            if server is not None:
                server.stop()
        if tty:
            self.stdout.write("")
        self.stdout.write(f"\nExperiment {experiment.pk} {experiment.status}"
                          + (f": {experiment.error}" if experiment.error else ""))
        summary = agent_summary(experiment)
        self.stdout.write(render_markdown(summary) if markdown else render_text(summary))

    def _bar(self, done: int, total: int) -> None:
        filled = BAR * done // total if total else BAR
        self.stdout.write(f"\r[{'#' * filled}{'.' * (BAR - filled)}] {done}/{total} "
                          f"{100 * done // max(total, 1)}%", ending="")
        self.stdout.flush()

    def _line(self, r: Result, done: int, total: int) -> None:
        if r.status == "done":
            verdict = f"{'passed' if r.passed else 'failed'} ({r.score:.2f})"
        elif (r.scorer_detail or {}).get("model_busy"):  # not counted against the agent
            verdict = f"model busy: {_clip(r.error, 80)}"
        else:
            verdict = f"{r.status}: {_clip(r.error, 80)}"
        where = f" · /runs/{r.run_id}/" if r.run_id else ""
        self.stdout.write(f"[{done}/{total}] {r.agent_name} · case {r.case.position} · "
                          f"{verdict}{where}")




HEADERS = ["agent", "mean score", "pass rate", "errors", "runs ok", "tokens", "cost $",
           "wall s"]


def _cells(r: dict[str, Any]) -> list[str]:
    def pct(v: float | None) -> str:
        return format_percent(v)

    return [r["agent"], "—" if r["mean_score"] is None else f"{r['mean_score']:.2f}",
            f"{pct(r['pass_rate'])} ({r['passed']}/{r['finished']})", str(r["errors"])
            + (f" (+{r['busy']} model busy)" if r.get("busy") else ""),
            f"{r['succeeded']}/{r['runs']}"
            + (f" (+{r['stopped']} stopped)" if r.get("stopped") else ""), str(r["tokens"]),
            f"{r['cost_usd']:.4f}",
            f"{r['wall_s']:.1f}"]


def render_markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + " --- |" * len(HEADERS)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in _cells(r)) + " |" for r in rows]
    return "\n".join(lines)


def render_text(rows: list[dict[str, Any]]) -> str:
    table = [HEADERS, *(_cells(r) for r in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(HEADERS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in table)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
