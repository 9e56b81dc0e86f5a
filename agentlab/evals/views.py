"""Evaluation pages: suites and the start form, one experiment's live matrix, comparisons.

Who may do what is traces.access's policy: watch an experiment (its pages), control it (cancel),
fork it (re-run: the new experiment is the asker's). An experiment started from the browser
counts towards its owner's runs going at once: it is admitted only with room for as many runs
as it runs at a time (`places`), and its runs then hold their places like any other.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib import messages
from django.db import transaction
from django.db.models import Count, Q, Sum
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from agentlab.evals import estimates, pairs, runner, summary
from agentlab.evals.demo import DEMO_SUITE
from agentlab.evals.forms import StartForm
from agentlab.evals.models import FINISHED_RESULT_STATUSES, Case, Experiment, Suite
from agentlab.models import Agent
from agentlab.runs import start
from traces import access
from traces.display.figures import best_value, format_percent
from traces.display.labels import status_word
from traces.models import Run

POLL_SECONDS = 1
DEMO_CONCURRENCY = 2  # the one-click demo forms' runs at a time (templates/evals/index.html)
SCORED = summary.SCORED  # what the mean score counts (an error is a 0, "model busy" nothing)
# The same, seen from an experiment (its results'), for the list's annotations.
COUNTED_RESULTS = (Q(results__status__in=SCORED)
                   & ~Q(results__scorer_detail__has_key=pairs.MODEL_BUSY))
# Summary columns: key, label, how it is shown, whether higher is better.
FIGURES = (("mean_score", "Mean score", "pct", True), ("pass_rate", "Pass rate", "pct", True),
           ("tokens", "Tokens", "int", False), ("cost_usd", "Cost", "cost", False),
           ("wall_s", "Wall time", "secs", False))


# -- the index: suites, the start form, experiments ---------------------------------------------

@require_http_methods(["GET", "POST"])
async def index(request: HttpRequest) -> HttpResponse:
    """Suites and experiments; a valid POST creates an experiment and starts it."""
    user = await request.auser()
    form = StartForm(request.POST or None, user=user)
    if request.method == "POST" and await sync_to_async(form.is_valid)():
        data = form.cleaned_data
        try:
            experiment = await sync_to_async(_admitted)(lambda: runner.create_experiment(
                user, data["suite"], data["agents"], title=data["title"],
                concurrency=data["concurrency"], judge_profile=data["judge_profile"],
                case_limit=data["case_limit"], run_timeout_s=data["run_timeout_s"],
                case_tags=data["case_tags"]))
        except start.RunLimit as exc:  # nothing saved
            form.add_error(None, str(exc))
        except ValueError as exc:  # e.g. LLM-judge cases without a judge (nothing saved)
            form.add_error(None, f"Cannot start: {exc}.")
        else:
            # An asyncio task of this (daphne's) loop: it outlives the request.
            runner.start_experiment(experiment)
            return redirect("evals:experiment", pk=experiment.pk)
    return await sync_to_async(_render_index)(request, user, form)


def _render_index(request: HttpRequest, user: Any, form: StartForm) -> HttpResponse:
    visible = Suite.objects.visible_to(user)
    suites = list(visible.annotate(case_count=Count("cases")))
    tags: dict[int, set[str]] = defaultdict(set)
    case_tags: dict[int, list[list[str]]] = defaultdict(list)  # each case's, for the estimate
    for suite_id, these in Case.objects.filter(suite__in=visible).values_list("suite_id",
                                                                             "tags"):
        tags[suite_id].update(str(t) for t in these or [])
        case_tags[suite_id].append([str(t) for t in these or []])
    for suite in suites:
        suite.tag_list = sorted(tags[suite.pk])
    experiments = list(
        Experiment.objects.visible_to(user).select_related("suite", "user")
        .annotate(n_total=Count("results"),
                  n_done=Count("results", filter=Q(results__status__in=FINISHED_RESULT_STATUSES)),
                  n_scored=Count("results", filter=COUNTED_RESULTS),
                  score_sum=Sum("results__score", filter=COUNTED_RESULTS))[:100])
    for e in experiments:
        e.percent = round(100 * e.n_done / e.n_total) if e.n_total else 0
        e.mean_score = (e.score_sum or 0) / e.n_scored if e.n_scored else None
        e.badge = badge(e.status, e.mean_score)
    demo = next((s for s in suites if s.name == DEMO_SUITE and s.case_count), None)
    paradigm_agents = _one_per_paradigm()
    all_agents = list(Agent.objects.select_related("model_profile"))
    context = {"form": form, "suites": suites, "experiments": experiments,
               "demo_suite": demo, "paradigm_agents": paradigm_agents,
               # What the start form's script estimates from (static/agentlab/evals.js).
               "estimate_data": {"cases": {s.pk: s.case_count for s in suites},
                                 "case_tags": {s.pk: case_tags[s.pk] for s in suites},
                                 **estimates.form_data(user, all_agents)}}
    if demo and paradigm_agents:
        small = min(estimates.SMALL_CASES, demo.case_count)
        context["demo_small"] = {"cases": small, **estimates.for_agents(
            user, paradigm_agents, small, DEMO_CONCURRENCY)}
        context["demo_full"] = estimates.for_agents(user, paradigm_agents, demo.case_count,
                                                    DEMO_CONCURRENCY)
    return render(request, "evals/index.html", context)


def badge(status: str, mean_score: float | None) -> dict[str, str]:
    """An experiment's badge: how it scored once finished ("scored 35%"), else its status."""
    if status == "succeeded" and mean_score is not None:
        level = "high" if mean_score >= 0.8 else "mid" if mean_score >= 0.4 else "low"
        return {"css": f"score score-{level}", "text": f"scored {format_percent(mean_score)}",
                "title": "finished; the mean score of its answers (an error counts as 0)"}
    words = {"succeeded": "finished", "failed": "failed"}
    return {"css": f"status status-{status}", "text": words.get(status, status_word(status)),
            "title": ""}


def places(experiment: Experiment) -> int:
    """The runs an experiment has going at once: its concurrency, or fewer pairs."""
    return min(experiment.concurrency, experiment.results.count())


@transaction.atomic
def _admitted(create: Callable[[], Experiment]) -> Experiment:
    """The experiment `create` makes, if its owner has room for its runs; else RunLimit
    and nothing is saved. Its pairs' runs then hold the places taken here (evals.pairs)."""
    experiment = create()
    start.reserve(experiment.user_id, places(experiment))
    return experiment


def _one_per_paradigm() -> list[Agent]:
    """The first agent of each paradigm (ReAct has four modes; one is enough). The default
    agents are created first, in their order, so a fresh install gets the defaults."""
    chosen: dict[str, Agent] = {}
    for agent in Agent.objects.select_related("model_profile").order_by("pk"):
        chosen.setdefault(agent.paradigm, agent)
    return list(chosen.values())


# -- one experiment ------------------------------------------------------------------------------

@require_GET
def detail(request: HttpRequest, pk: int) -> HttpResponse:
    return render(request, "evals/experiment.html", _experiment_context(request, pk))


@require_GET
def live(request: HttpRequest, pk: int) -> HttpResponse:
    """The progress, matrix and summary fragment alone (htmx polls it while it runs)."""
    return render(request, "evals/experiment.html#live", _experiment_context(request, pk))


def _experiment_context(request: HttpRequest, pk: int) -> dict[str, Any]:
    experiment = _get(request.user, pk)
    done, total = experiment.progress()
    cases, columns, cells = summary.matrix(experiment)
    agents = _summary_rows(summary.agent_summary(experiment))
    finished = not experiment.is_active
    earlier = (Experiment.objects.visible_to(request.user)
               .filter(suite=experiment.suite_id).exclude(pk=pk).order_by("-created")[:50])
    scored = experiment.results.filter(summary.COUNTED).aggregate(n=Count("pk"),
                                                                   total=Sum("score"))
    mean = (scored["total"] or 0) / scored["n"] if scored["n"] else None
    return {
        "experiment": experiment, "done": done, "total": total, "finished": finished,
        "badge": badge(experiment.status, mean),
        "percent": round(100 * done / total) if total else 0,
        "columns": columns, "rows": list(zip(cases, cells, strict=True)),
        "agents": agents, "figures": FIGURES, "earlier": list(earlier),
        "judged": any(a["judge_tokens"] for a in agents),
        "chart": _chart(agents) if finished and agents else None,
        "poll_seconds": POLL_SECONDS,
    }


def _summary_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mark the best value of each figure ("best" = the set of keys where a row leads);
    ties are all marked, and a figure where every agent is equal marks none."""
    for row in rows:
        row["best"] = set()
    for key, _label, _kind, higher in FIGURES:
        # Only agents that answered something are ranked (a cost of 0 for no runs is no win).
        ranked = [r for r in rows if r["finished"] and r[key] is not None]
        top = best_value((r[key] for r in ranked), higher=higher)
        for r in ranked:
            if top is not None and r[key] == top:
                r["best"].add(key)
    return rows


def _chart(agents: list[dict[str, Any]]) -> dict[str, list]:
    """What the chart plots: score and pass rate (%) per agent, and its mean time per case."""
    return {
        "labels": [a["agent"] for a in agents],
        "mean_score": [round(100 * (a["mean_score"] or 0), 1) for a in agents],
        "pass_rate": [round(100 * (a["pass_rate"] or 0), 1) for a in agents],
        "mean_wall_s": [round(a["mean_wall_s"] or 0, 2) for a in agents],
    }


@require_POST
def cancel(request: HttpRequest, pk: int) -> HttpResponse:
    """Cancel what has not finished; finished results stay."""
    experiment = _get(request.user, pk, "control")
    if runner.cancel_experiment(experiment.pk):
        messages.info(request, "Experiment cancelled; the finished results are kept.")
    else:
        messages.info(request, "The experiment had already finished.")
    return redirect("evals:experiment", pk=pk)


@require_POST
async def rerun(request: HttpRequest, pk: int) -> HttpResponse:
    """The same suite, agents and settings again, as a new experiment compared with this one."""
    user = await request.auser()
    experiment = await sync_to_async(_get)(user, pk, "fork")
    try:
        new = await sync_to_async(_admitted)(lambda: runner.rerun(experiment, user))
    except start.RunLimit as exc:  # nothing saved
        messages.error(request, str(exc))
        return redirect("evals:experiment", pk=pk)
    except ValueError as exc:  # no agent left, the suite emptied…
        messages.error(request, f"Cannot re-run: {exc}.")
        return redirect("evals:experiment", pk=pk)
    runner.start_experiment(new)
    return redirect("evals:experiment", pk=new.pk)


# -- comparing with an earlier experiment --------------------------------------------------------

@require_GET
def compare_pick(request: HttpRequest, pk: int) -> HttpResponse:
    """The "Compare with…" selector's target: ?other=<id> -> the comparison's own URL."""
    _get(request.user, pk)  # another user's experiment is a 404 here too
    try:
        other = int(request.GET.get("other", ""))
    except ValueError:
        raise Http404("choose an experiment to compare with") from None
    return redirect("evals:compare", pk=pk, other=other)


@require_GET
def compare(request: HttpRequest, pk: int, other: int) -> HttpResponse:
    """Per case × agent: the earlier result, this one, and whether it got better or worse."""
    experiment, earlier = _get(request.user, pk), _get(request.user, other)
    if experiment.suite_id != earlier.suite_id or experiment.pk == earlier.pk:
        raise Http404("only two experiments of the same suite can be compared")
    changes = summary.compare(experiment, earlier)
    return render(request, "evals/compare.html", {
        "experiment": experiment, "earlier": earlier, "changes": changes,
        "counts": summary.change_counts(changes),
    })


@require_GET
def suite_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """A suite's cases, readable outside the admin: question, expected answer, scorer, tags,
    and the run each case was made from (a link where the visitor may see that run)."""
    suite = (Suite.objects.visible_to(request.user).select_related("owner")
             .filter(pk=pk).first())
    if suite is None:
        raise Http404("no such suite")
    cases = list(suite.cases.order_by("position", "id"))
    sources = {c.source_run_id for c in cases if c.source_run_id}
    seen = set(Run.objects.visible_to(request.user).filter(pk__in=sources)
               .values_list("pk", flat=True)) if sources else set()
    editable = Suite.objects.editable_by(request.user).filter(pk=pk).exists()
    return render(request, "evals/suite.html", {"suite": suite, "cases": cases,
                                                "from_runs": bool(sources), "seen_runs": seen,
                                                "editable": editable})


def _get(user: Any, pk: int, action: access.Action = "watch") -> Experiment:
    # Another user's experiment is a 404 (like runs): its existence is not disclosed.
    return access.require(user, action,
                          Experiment.objects.select_related("suite", "user", "previous"), pk)
