"""`manage.py bench_traces`: how fast the trace viewer is on big runs, as printed figures.

It creates synthetic runs under a `bench` user in the current database, calls the pages through
django.test.Client (server time only: no network, no browser) and deletes its runs at the end
unless --keep.
"""

from __future__ import annotations

import gc
import random
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from itertools import batched
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.http import StreamingHttpResponse
from django.test import Client
from django.urls import reverse

from traces import bundle_store, hooks, timeline_summary
from traces.diff import diff_steps, word_diffs
from traces.diff_pages import Subtrees, page, start_of
from traces.management import bench_import, bench_page
from traces.models import Run, Step
from traces.schema import Step as StepRecord

PAGE_GOAL_S, PAGE_GOAL_STEPS = 1.0, 25_000
DIFF_GOAL_MS, DIFF_GOAL_STEPS = 200.0, 1_000
LONG_DIFF_GOAL_MS, LONG_DIFF_GOAL_STEPS = 1000.0, 100_000
# The diff before issue 37 (ms, this 2-core machine): the anchor the figures are printed beside.
DIFF_BEFORE_MS = {1_000: 17, 10_000: 354, 30_000: 637, 100_000: 2_296}
PARTS = ("page", "runs", "diff", "import")
T0 = 1_700_000_000.0  # when the synthetic runs start (epoch s)
TOOLS = ("get_weather", "calculator", "sql_query", "search_docs", "read_file")
WORDS = ("the", "agent", "looked", "up", "weather", "data", "and", "then", "computed", "a",
         "total", "from", "table", "rows", "for", "Paris")


def synthetic_steps(n: int, *, seed: int = 0) -> list[StepRecord]:
    """A realistic mix: plans, llm calls with message lists, thoughts, tools with JSON, finals."""
    return list(iter_synthetic_steps(n, seed=seed))


def iter_synthetic_steps(n: int, *, seed: int = 0) -> Iterator[StepRecord]:
    """synthetic_steps one at a time (a million steps need not be in memory at once)."""
    rng, t, seq = random.Random(seed), T0, 0
    plan = None
    while seq < n - 1:
        seq += 1
        t += rng.uniform(0.05, 2.0)
        turn = seq % 7
        if turn == 1 and seq % 50 == 1:
            plan = seq
            yield StepRecord(seq=seq, kind="plan", text=_words(rng, 30), started_at=t,
                              input={"steps": [_words(rng, 6) for _ in range(4)]})
        elif turn in (1, 4):
            tool = rng.choice(TOOLS)
            messages = [{"role": "system", "content": _words(rng, 60)},
                        *({"role": rng.choice(["user", "assistant", "tool"]),
                           "content": _words(rng, 40)} for _ in range(5))]
            yield StepRecord(
                seq=seq, kind="llm", name="bench-model", parent=plan, started_at=t,
                duration_ms=rng.uniform(200, 4000), tokens_in=rng.randint(300, 3000),
                tokens_out=rng.randint(10, 300), cost_usd=rng.uniform(0, 0.01),
                input={"messages": messages, "tools": None, "temperature": 0.2},
                output={"text": "", "tool_calls": [{"id": f"call_{seq}", "name": tool,
                                              "arguments": {"q": _words(rng, 3)},
                                              "raw_arguments": "{}", "error": None}],
                        "usage": {"prompt_tokens": 300, "completion_tokens": 20},
                        "model": "bench-model", "latency_ms": 900.0},
                text=_words(rng, 25))
        elif turn in (2, 5):
            yield StepRecord(seq=seq, kind="thought", parent=plan, started_at=t,
                              text=_words(rng, rng.randint(10, 60)))
        elif turn == 6 and seq % 97 == 6:
            yield StepRecord(seq=seq, kind="error", status="error", parent=plan,
                              started_at=t, text="could not parse the reply: no Action")
        else:
            tool = rng.choice(TOOLS)
            big = seq % 40 == 3  # some observations are long (a table, a file)
            body = _words(rng, 4000 if big else rng.randint(5, 80))
            yield StepRecord(
                seq=seq, kind="tool", name=tool, parent=plan, started_at=t,
                duration_ms=rng.uniform(1, 800), input={"q": _words(rng, 3), "limit": 10},
                output={"tool": tool, "ok": True, "output": body, "observation": body[:2000]},
                text=body[:2000])
    if n > 0:
        yield StepRecord(seq=seq + 1, kind="final", text=_words(rng, 20), started_at=t + 1)


def perturbed(steps: list[StepRecord], *, seed: int = 1) -> list[StepRecord]:
    """A copy with what a fork or a replay changes: edited arguments, text, inserted/lost steps."""
    rng = random.Random(seed)
    out = [StepRecord(**s.to_dict()) for s in steps]
    for _ in range(max(1, len(out) // 100)):
        i = rng.randrange(len(out))
        step = out[i]
        if step.kind == "tool":
            step.input = {**step.input, "q": "changed"}
        else:
            step.text = f"{step.text} (changed)"
    del out[rng.randrange(len(out)) // 2]
    out.insert(len(out) // 3, StepRecord(kind="thought", text="an extra thought"))
    return out


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(WORDS, k=n))


class Command(BaseCommand):
    help = "Benchmark the run page, the runs list and the diff on synthetic runs; print figures."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--sizes", default="1000,10000,25000",
                            help="Steps per generated run (comma-separated)")
        parser.add_argument("--runs", type=int, default=10_000, help="Runs for the runs list")
        parser.add_argument("--diff-sizes", default="1000,10000", help="Steps per diffed run")
        parser.add_argument("--quick", action="store_true",
                            help="Smaller: --sizes 1000 --runs 1000 --diff-sizes 1000")
        parser.add_argument("--keep", action="store_true", help="Keep the generated runs")
        parser.add_argument("--no-browser", action="store_true",
                            help="Leave out the web process's memory and Chromium's timings")
        parser.add_argument("--reuse", action="store_true",
                            help="Measure runs of these sizes kept by an earlier --keep instead "
                                 "of generating them (a million steps take minutes to make)")
        parser.add_argument("--shots", metavar="DIR",
                            help="Save screenshots of the longest run's page there")
        parser.add_argument("--only", choices=PARTS, action="append",
                            help="Measure only this part (repeatable): page, runs, diff or "
                                 "import; e.g. --only diff --diff-sizes 1000,10000,30000,100000")
        parser.add_argument("--phoenix", action="store_true",
                            help="The anchor: the same trace opened here and in Arize Phoenix "
                                 "(its virtualenv: AGENTLAB_PHOENIX_PYTHON)")
        parser.add_argument("--phoenix-spans", default="10000",
                            help="Spans of each --phoenix trace (comma-separated)")
        parser.add_argument("--import-spans", type=int, default=100_000,
                            help="Spans of the OTLP file --only import imports (1000000: the "
                                 "issue's figure, ~10× the time and memory of 100000)")

    def handle(self, *args: Any, sizes: str, runs: int, diff_sizes: str, quick: bool,
               keep: bool, only: list[str] | None = None, no_browser: bool = False,
               shots: str | None = None, reuse: bool = False, import_spans: int = 100_000,
               phoenix: bool = False, phoenix_spans: str = "10000", **options: Any) -> None:
        if quick:
            sizes, runs, diff_sizes = "1000", 1000, "1000"
        if only:
            sizes = sizes if "page" in only else ""
            runs = runs if "runs" in only else 0
            diff_sizes = diff_sizes if "diff" in only else ""
        import_spans = import_spans if only and "import" in only else 0
        try:
            page_sizes = [int(s) for s in sizes.split(",") if s]
            diffs = [int(s) for s in diff_sizes.split(",") if s]
        except ValueError:
            raise CommandError("--sizes and --diff-sizes take integers, e.g. 1000,10000") from None
        users = get_user_model().objects
        user, created_user = users.get_or_create(username="bench", defaults={"is_active": True})
        made: list[int] = []
        try:
            ids = {n: (reuse and self._kept(user, n)) or self._generate(user, n, made)
                   for n in page_sizes}
            pages = [self._page(user, n, ids[n]) for n in page_sizes]
            long = self._long(user, ids[max(ids)], max(ids), not no_browser,
                              shots) if pages else None
            listing = self._listing(user, runs, made) if runs else None
            diff_ms = [(n, *self._diff(n)) for n in diffs]
            imported = (self._import(user, import_spans, keep, reuse, not no_browser)
                        if import_spans > 1 else None)
            anchor = self._phoenix(user, phoenix_spans) if phoenix else None
        finally:
            if not keep:
                self.stdout.write(f"deleting {len(made):,} generated runs…")
                for start in range(0, len(made), 500):
                    Run.objects.filter(pk__in=made[start:start + 500]).delete()
                if created_user:
                    user.delete()
        self._report(pages, listing, diff_ms)
        if long:
            bench_page.report(self.stdout.write, pages, long)
        if imported:
            bench_import.report(self.stdout.write, imported)
            self.stdout.write("The imported run:")
            bench_page.report(self.stdout.write, [imported["page"]], imported["long"])
        if anchor:
            bench_import.report_anchor(self.stdout.write, *anchor)

    # ------------------------------------------------------------------ measures

    def _kept(self, user: Any, n: int) -> int | None:
        found = Run.objects.filter(user=user, input=f"bench question ({n} steps)",
                                   step_count=n).values_list("pk", flat=True).last()
        if found:
            self.stdout.write(f"measuring the kept run {found} of {n:,} steps")
        return found

    def _generate(self, user: Any, n: int, made: list[int]) -> int:
        self.stdout.write(f"generating a run of {n:,} steps…")
        run = Run.objects.create(user=user, agent_name="bench", paradigm="react",
                                 input=f"bench question ({n} steps)", status="succeeded",
                                 final_answer="bench answer", step_count=n,
                                 started_at=datetime.fromtimestamp(T0, tz=UTC),
                                 finished_at=datetime.now(tz=UTC))
        made.append(run.pk)
        totals = dict.fromkeys(("llm_calls", "tool_calls", "tokens_in", "tokens_out"), 0)
        for chunk in batched(iter_synthetic_steps(n), 2000):
            Step.objects.bulk_create([Step.from_record(run.pk, s) for s in chunk])
            for s in chunk:  # the run's stored totals, as a recorded run has them
                totals["llm_calls"] += s.kind == "llm"
                totals["tool_calls"] += s.kind == "tool"
                totals["tokens_in"] += s.tokens_in
                totals["tokens_out"] += s.tokens_out
        Run.objects.filter(pk=run.pk).update(**totals)
        if n > timeline_summary.SUMMED_FROM:  # as an import does once it has written the run
            started = time.perf_counter()
            timeline_summary.update(run, n)
            self.stdout.write(f"  timeline summed in {time.perf_counter() - started:.1f} s")
        return run.pk

    def _page(self, user: Any, n: int, run_id: int) -> tuple[int, float, float, int]:
        self._get(user, reverse("run", args=[run_id]))  # warm-up: templates, caches
        first, full, size = min(self._get(user, reverse("run", args=[run_id]))
                                for _ in range(3))
        self.stdout.write(f"run page of {n:,} steps: first byte {first * 1000:.0f} ms, "
                          f"{size:,} bytes")
        return n, first, full, size

    def _long(self, user: Any, run_id: int, n: int, web: bool,
              shots: str | None) -> dict[str, Any]:
        """The longest run's jump, search, memory and browser figures (bench_page)."""
        self.stdout.write(f"jumps and searches in the run of {n:,} steps…")
        figures: dict[str, Any] = {"steps": n, **bench_page.server_figures(
            lambda url: self._get(user, url)[0], run_id, n)}
        if web:
            self.stdout.write("the web process (daphne) and Chromium…")
            client = Client(SERVER_NAME=_host())
            client.force_login(user)
            session = client.cookies[settings.SESSION_COOKIE_NAME].value
            figures.update(bench_page.web_figures(session, run_id, n, shots))
        return figures

    def _listing(self, user: Any, n: int, made: list[int]) -> tuple[int, float, int]:
        self.stdout.write(f"generating {n:,} runs for the runs list…")
        now = datetime.now(tz=UTC)
        for start in range(0, n, 2000):
            batch = [Run(user=user, agent_name=f"bench {i % 7}", paradigm="react",
                         input=f"bench question {i}", status="succeeded", final_answer="42",
                         llm_calls=i % 9, tool_calls=i % 5, tokens_in=i, step_count=0,
                         started_at=now, finished_at=now)
                     for i in range(start, min(n, start + 2000))]
            made += [r.pk for r in Run.objects.bulk_create(batch)]
            self.stdout.write(f"  {min(n, start + 2000):,} / {n:,}")
        self._get(user, reverse("runs"))
        _first, full, size = self._get(user, reverse("runs"))
        return n, full, size

    def _diff(self, n: int) -> tuple[float, int, float]:
        """(ms of the diff with every changed row's word diff, as before; rows; ms of what the
        diff page computes: the alignment, the page at the first divergence, its word diffs)."""
        a = synthetic_steps(n)
        b = perturbed(a)
        best = page_best = float("inf")
        for _ in range(3):
            gc.collect()  # the steps just made are not the diff's garbage to collect
            started = time.perf_counter()
            result = diff_steps(a, b)
            best = min(best, (time.perf_counter() - started) * 1000)
            gc.collect()
            started = time.perf_counter()
            paged = diff_steps(a, b, shown=0)
            shown = page(paged.rows, Subtrees(paged.rows), start_of(paged.first_divergence))
            word_diffs(item.row for item in shown.items if item.kind == "row" and item.row)
            page_best = min(page_best, (time.perf_counter() - started) * 1000)
        self.stdout.write(f"diff {n:,} vs {len(b):,} steps: {best:.0f} ms, "
                          f"the diff page's part {page_best:.0f} ms")
        return best, len(result.rows), page_best

    def _import(self, user: Any, n: int, keep: bool, reuse: bool,
                web: bool) -> dict[str, Any]:
        """An OTLP file of n spans (the synthetic run exported), imported as `import_run`
        does, then the imported run's page, jumps and searches; the run is deleted unless
        `keep` (bench_import). With `keep` the file stays in the var folder for `reuse`."""
        with tempfile.TemporaryDirectory() as folder:
            kept = Path(settings.VAR_DIR) / f"bench-import-{n}.otlp.jsonl"
            path = kept if keep or reuse else Path(folder) / "bench.otlp.jsonl"
            if not (reuse and path.exists()):
                self.stdout.write(f"writing an OTLP JSON-lines file of {n:,} spans…")
                bench_import.write_otlp(path, n, iter_synthetic_steps(n - 1), T0)
            self.stdout.write(f"importing it ({path.stat().st_size / 2**20:,.1f} MiB)…")
            figures = bench_import.measure(path, user, None)
        try:
            steps = figures["spans"] - 1
            figures["page"] = self._page(user, steps, figures["run"])
            figures["long"] = self._long(user, figures["run"], steps, web, None)
        finally:
            if not keep:
                bundle_store.discard(figures["run"])
        return figures

    def _phoenix(self, user: Any, sizes: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Traces sent to Phoenix (the hook `phoenix_anchor`), then opened here."""
        answer = hooks.hook("phoenix_anchor")
        if answer is None:
            return {"skipped": "no hook answers phoenix_anchor (agentlab is not installed)"}, []
        self.stdout.write(f"Phoenix: traces of {sizes} spans (minutes)…")
        phoenix = answer([int(s) for s in sizes.split(",") if s])
        ours = [bench_import.open_trace(t["otlp"], user, lambda url: self._get(user, url)[0],
                                        bundle_store.discard)
                for t in phoenix.get("traces", [])]
        return phoenix, ours

    def _get(self, user: Any, url: str) -> tuple[float, float, int]:
        """(seconds to the first byte, seconds to the last, bytes) of one GET, server side."""
        client = Client(SERVER_NAME=_host(), raise_request_exception=False)
        client.force_login(user)
        started = time.perf_counter()
        response = client.get(url)
        if response.status_code != 200:
            raise CommandError(f"GET {url} answered {response.status_code}; see the server log")
        if isinstance(response, StreamingHttpResponse):
            chunks = iter(response.streaming_content)
            head = next(chunks, b"")
            first = time.perf_counter() - started
            size = len(head) + sum(len(c) for c in chunks)
        else:
            first, size = time.perf_counter() - started, len(response.content)
        return first, time.perf_counter() - started, size

    # ------------------------------------------------------------------ report

    def _report(self, pages: list[tuple[int, float, float, int]],
                listing: tuple[int, float, int] | None,
                diffs: list[tuple[int, float, int, float]]) -> None:
        out = self.stdout.write
        out("\nRun page (GET /runs/<id>/)")
        out(f"  {'steps':>8}  {'first byte':>11}  {'full':>9}  {'size':>11}")
        for n, first, full, size in pages:
            out(f"  {n:>8,}  {first * 1000:>8.0f} ms  {full * 1000:>6.0f} ms  {_kb(size):>11}")
        if listing:
            n, full, size = listing
            out(f"Runs list (GET /runs/) with {n:,} runs: {full * 1000:.0f} ms, {_kb(size)}")
        for n, ms, rows, _page in diffs:
            out(f"Diff {n:,} vs {n:,} steps: {ms:.0f} ms ({rows:,} rows)")
        if diffs:
            self._diff_table(diffs)
        out("Goals")
        page = next((p for p in pages if p[0] == PAGE_GOAL_STEPS), None)
        out(_goal(f"{PAGE_GOAL_STEPS:,}-step page first byte < {PAGE_GOAL_S:g} s",
                  page and f"{page[1]:.2f} s", page is not None and page[1] < PAGE_GOAL_S))
        diff = next((d for d in diffs if d[0] == DIFF_GOAL_STEPS), None)
        out(_goal(f"diff {DIFF_GOAL_STEPS:,} vs {DIFF_GOAL_STEPS:,} < {DIFF_GOAL_MS:g} ms",
                  diff and f"{diff[1]:.0f} ms", diff is not None and diff[1] < DIFF_GOAL_MS))
        long = next((d for d in diffs if d[0] == LONG_DIFF_GOAL_STEPS), None)
        out(_goal(f"diff {LONG_DIFF_GOAL_STEPS:,} vs {LONG_DIFF_GOAL_STEPS:,} "
                  f"< {LONG_DIFF_GOAL_MS / 1000:g} s (before: "
                  f"{DIFF_BEFORE_MS[LONG_DIFF_GOAL_STEPS]:,} ms)",
                  long and f"{long[1]:,.0f} ms", long is not None and long[1] < LONG_DIFF_GOAL_MS))

    def _diff_table(self, diffs: list[tuple[int, float, int, float]]) -> None:
        """The diff's figures beside the figure before (the anchor) and the goal."""
        out = self.stdout.write
        out("Diff of two runs (synthetic vs perturbed copy; best of 3)")
        out(f"  {'steps':>9}  {'before':>9}  {'now':>9}  {'page part':>9}  {'goal':>9}")
        for n, ms, _rows, page_ms in diffs:
            before = f"{DIFF_BEFORE_MS[n]:,} ms" if n in DIFF_BEFORE_MS else "—"
            goal = f"< {LONG_DIFF_GOAL_MS:,.0f} ms" if n == LONG_DIFF_GOAL_STEPS else ""
            out(f"  {n:>9,}  {before:>9}  {ms:>6,.0f} ms  {page_ms:>6,.0f} ms  {goal:>9}")
        out("  before: the diff at the start of issue 37; now: every changed row word-diffed; "
            "page part: alignment + the first page's word diffs, as the diff page does")


def _host() -> str:
    """A host name the site accepts (the test client's default, testserver, may not be)."""
    for host in settings.ALLOWED_HOSTS:
        if host != "*":
            return host.lstrip(".")
    return "localhost"


def _goal(label: str, figure: str | None, met: bool) -> str:
    if figure is None:
        return f"  {label}: not measured (size not in this run)"
    return f"  {label}: {figure} — {'met' if met else 'NOT met'}"


def _kb(size: int) -> str:
    return f"{size / 1024:,.1f} KB" if size < 1024 * 1024 else f"{size / 1024 / 1024:,.1f} MB"
