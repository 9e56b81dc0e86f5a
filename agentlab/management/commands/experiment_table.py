"""`manage.py experiment_table ID [--write docs/PARADIGMS.md]`: an experiment's per-agent table
in Markdown, with the date, the machine and its load, printed or written into the document
between its markers (so docs/PARADIGMS.md's figures come from a command, not by hand)."""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from agentlab.evals.models import Experiment
from agentlab.evals.summary import agent_summary
from agentlab.management.commands.run_experiment import render_markdown

START, END = "<!-- experiment-table:start -->", "<!-- experiment-table:end -->"


def machine() -> str:
    """The CPU model and how many cores this process may use."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{cores} × {model}, {platform.system()} {platform.release()}"


def section(experiment: Experiment, note: str = "") -> str:
    rows = agent_summary(experiment)
    cases = experiment.results.values("case").distinct().count()
    when = experiment.finished_at or experiment.created
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    lines = [START, "",
             f"Experiment {experiment.pk} on suite '{experiment.suite.name}', {cases} cases × "
             f"{len(rows)} agents, {experiment.concurrency} at a time"
             + (f", at most {experiment.run_timeout_s:g} s a run" if experiment.run_timeout_s
                else "") + f"; finished {when:%Y-%m-%d %H:%M} UTC ({experiment.status}).",
             f"Machine: {machine()}; load average when written (1/5/15 min): {load}.",
             *([note] if note else []), "", render_markdown(rows), "", END]
    return "\n".join(lines)


class Command(BaseCommand):
    help = "An experiment's per-agent table in Markdown (date, machine, load); --write puts it "\
           "into a document between <!-- experiment-table:start/end --> markers."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("experiment", type=int)
        parser.add_argument("--write", metavar="FILE", help="e.g. docs/PARADIGMS.md")
        parser.add_argument("--note", default="", help="A line under the heading (e.g. load).")

    def handle(self, *args: Any, experiment: int, write: str | None, note: str,
               **options: Any) -> None:
        found = Experiment.objects.select_related("suite").filter(pk=experiment).first()
        if found is None:
            raise CommandError(f"No experiment {experiment}.")
        text = section(found, note)
        if not write:
            self.stdout.write(text)
            return
        path = Path(write)
        doc = path.read_text(encoding="utf-8")
        if START in doc and END in doc:
            doc = re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: text, doc,
                         flags=re.DOTALL)
        else:
            doc = doc.rstrip("\n") + "\n\n" + text + "\n"
        path.write_text(doc, encoding="utf-8")
        self.stdout.write(f"Wrote experiment {experiment}'s table into {path}.")
