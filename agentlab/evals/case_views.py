"""Cases from runs: "Add to suite" (one run from its page, many from the runs list) and the
playground cases saved from LLM steps (saved, listed, opened in the playground, deleted).

Every request is authorized on its own: the runs are read through `Run.objects.visible_to`
(your own; staff all) and one that is not there is a 404, the suite through
`Suite.objects.editable_by` (your own; staff all) and a playground case only from the user's
own. What was typed is checked by `from_runs` before anything is written.
"""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib import messages
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from agentlab.evals import from_runs
from agentlab.evals.from_runs import Refused
from agentlab.evals.models import SCORERS, Case, PlaygroundCase, Suite
from agentlab.forks.playground import PARAM_KEYS, parse_request, send
from agentlab.models import ModelProfile
from traces import access
from traces.models import Run, Step

NEW = "new"  # the suite choice that makes a new suite
SCORER_HELP = {"exact": "the answer is it", "contains": "the answer contains it",
               "numeric": "its last number, ± a tolerance",
               "regex": "a pattern the answer matches",
               "json_schema": "its JSON is valid against a schema", "llm_judge": "a model judges"}


# -- Add to suite --------------------------------------------------------------------------------

@require_http_methods(["GET", "POST"])
def add_runs(request: HttpRequest) -> HttpResponse:
    """GET ?run=…: the form for those runs; POST: their cases added to the chosen suite."""
    data = request.POST if request.method == "POST" else request.GET
    try:
        ids = from_runs.run_ids(data.getlist("run"))
    except Refused as exc:
        return _form(request, [], data, exc.problems)
    runs = _visible_runs(request.user, ids)
    if request.method == "GET":
        return _form(request, runs, data, [])
    suite = _chosen_suite(request.user, data)  # a 404 before anything is checked
    problems: list[str] = []
    typed = {r.pk: data[f"expected-{r.pk}"] for r in runs if f"expected-{r.pk}" in data}
    target = suite or _checked(problems, from_runs.new_suite_name, data.get("new_suite", ""))
    tags = _checked(problems, from_runs.tags_from, data.get("tags", ""))
    items = _checked(problems, from_runs.drafts, runs, typed)
    if not problems:
        rows = _checked(problems, from_runs.check, items, data.get("scorer") or "contains",
                        tags)
    if not problems:
        added = _checked(problems, from_runs.add_to_suite, target, request.user, items, rows)
    if problems:
        return _form(request, runs, data, problems)
    messages.success(request, _said(added))
    if data.get("back") == "run" and len(runs) == 1:
        return redirect("run", pk=runs[0].pk)
    return redirect("evals:suite", pk=added.suite.pk)


def _checked(problems: list[str], check: Any, *args: Any) -> Any:
    """`check(*args)`, or None with its problems added to `problems` (every field is checked,
    so the page says everything that is wrong at once)."""
    try:
        return check(*args)
    except Refused as exc:
        problems.extend(exc.problems)
        return None


def _visible_runs(user: Any, ids: list[int]) -> list[Run]:
    """The runs, in the order named, if the user may see every one of them; else a 404 (which
    one is not said: another user's run is not disclosed)."""
    found = {r.pk: r for r in Run.objects.visible_to(user).filter(pk__in=ids).only(
        "pk", "input", "final_answer", "status", "agent_name", "user_id")}
    if len(found) != len(ids):
        raise Http404("no such run")
    return [found[i] for i in ids]


def _chosen_suite(user: Any, data: QueryDict) -> Suite | None:
    """The suite chosen, if the user may add to it (else a 404); None for a new one."""
    raw = data.get("suite", NEW)
    if raw == NEW:
        return None
    if not raw.isdigit():
        raise Http404("no such suite")
    return get_object_or_404(Suite.objects.editable_by(user), pk=int(raw))


def _said(added: from_runs.Added) -> str:
    name = f"“{added.suite.name}”"
    cases = added.cases
    if len(cases) == 1:
        text = f"Run {cases[0].source_run_id} is now case #{cases[0].position} of {name}."
    elif cases:
        text = (f"Added {len(cases)} runs to {name} as cases #{cases[0].position}–"
                f"#{cases[-1].position}.")
    else:
        text = f"Nothing added to {name}."
    if added.already:
        which = ", ".join(f"run {c.source_run_id} (case #{c.position})" for c in added.already)
        text += f" Already there, not added again: {which}."
    return text


def _form(request: HttpRequest, runs: list[Run], data: QueryDict,
          problems: list[str]) -> HttpResponse:
    rows = [{"run": r, "expected": data.get(f"expected-{r.pk}", r.final_answer or "")}
            for r in runs]
    options = form_options(request.user)
    suites = options["suites"]
    chosen = data.get("suite") or (str(suites[0]["pk"]) if suites else NEW)
    return render(request, "evals/add_runs.html", {
        "rows": rows, "errors": problems, "chosen": chosen, "form": options,
        "new_suite": data.get("new_suite", ""), "tags": data.get("tags", ""),
        "scorer": data.get("scorer") or "contains", "back": data.get("back", ""),
    }, status=400 if problems else 200)


def form_options(user: Any) -> dict[str, Any]:
    """What "Add to suite" offers `user`: the suites they may add to, the scorers, the limits
    (this page, and the run page and runs list through the `case_form` hook)."""
    suites = Suite.objects.editable_by(user).order_by("name").values("pk", "name")[:500]
    return {"suites": list(suites),
            "scorers": [(s, s.replace("_", " "), SCORER_HELP[s]) for s in SCORERS],
            "limits": {"runs": from_runs.MAX_RUNS, "expected": from_runs.MAX_EXPECTED_CHARS,
                       "tags": from_runs.MAX_TAGS, "tag": from_runs.MAX_TAG_CHARS,
                       "tags_chars": from_runs.MAX_TAGS * (from_runs.MAX_TAG_CHARS + 2)}}


def run_cases(user: Any, run_id: int) -> list[dict[str, Any]]:
    """The cases made from a run, in the suites `user` may see (the run page, through the
    `run_cases` hook)."""
    cases = (Case.objects.filter(source_run_id=run_id, suite__in=Suite.objects.visible_to(user))
             .select_related("suite").order_by("suite__name", "position")[:20])
    return [{"suite": c.suite.name, "position": c.position,
             "url": reverse("evals:suite", args=[c.suite_id]) + f"#case-{c.pk}"} for c in cases]


# -- playground cases ----------------------------------------------------------------------------

def _own_case(user: Any, pk: int) -> PlaygroundCase:
    """One of the user's own playground cases (anyone else's, staff's too, is a 404)."""
    return get_object_or_404(PlaygroundCase.objects.filter(user_id=user.pk), pk=pk)


@require_POST
def playground_case_save(request: HttpRequest, pk: int, seq: int) -> HttpResponse:
    """The playground's request, as edited, saved as the user's playground case."""
    run = access.visible_run(request.user, pk)
    step = get_object_or_404(Step.objects.only("pk", "seq", "kind", "role", "name", "output"),
                             run=run, seq=seq, kind="llm")
    data = request.POST
    sent, problems = parse_request(data.get("messages", ""), data.get("params", ""))
    case = None
    try:
        name, expected = from_runs.case_fields(run, step, data.get("case_name", ""),
                                               data.get("case_expected", ""))
        tags = from_runs.tags_from(data.get("case_tags", ""))
    except Refused as exc:
        problems = problems + exc.problems
    if not problems and sent is not None:
        case = from_runs.save_playground_case(request.user, run, step, sent, name=name,
                                              expected=expected, tags=tags,
                                              profile=data.get("profile", ""))
    if case is None:  # the playground again, as it was typed, saying what is wrong
        return render(request, "forks/playground.html", {
            "run": run, "step": step, "errors": problems, "save_open": True,
            "profiles": list(ModelProfile.objects.order_by("name")),
            "values": {k: data.get(k, "") for k in ("messages", "params", "profile")},
            "case": {k: data.get(f"case_{k}", "") for k in ("name", "expected", "tags")},
            "recorded": step.output if isinstance(step.output, dict) else {}}, status=400)
    messages.success(request, f"Saved as the playground case “{case.name}”.")
    return redirect("evals:playground_case", pk=case.pk)


@require_GET
def playground_cases(request: HttpRequest) -> HttpResponse:
    """The user's playground cases, newest first (`?q=` searches names and tags)."""
    cases = PlaygroundCase.objects.filter(user_id=request.user.pk)
    if q := request.GET.get("q", "").strip()[:200]:
        cases = cases.filter(Q(name__icontains=q) | Q(tags__icontains=q))
    return render(request, "evals/playground_cases.html", {
        "cases": list(cases.only("pk", "name", "tags", "profile", "source_run_id", "source_seq",
                                 "created", "messages")[:200]), "q": q})


@require_POST
def playground_case_delete(request: HttpRequest, pk: int) -> HttpResponse:
    case = _own_case(request.user, pk)
    case.delete()
    messages.info(request, f"Deleted the playground case “{case.name}”.")
    return redirect("evals:playground_cases")


def _case_page(user: Any, pk: int) -> tuple[PlaygroundCase, list[ModelProfile], bool]:
    case = _own_case(user, pk)
    source_seen = bool(case.source_run_id) and access.may_act(user, "watch", case.source_run_id)
    return case, list(ModelProfile.objects.order_by("name")), source_seen


@require_http_methods(["GET", "POST"])
async def playground_case(request: HttpRequest, pk: int) -> HttpResponse:
    """A saved case in the playground: its request, edited or not, sent to any profile."""
    user = await request.auser()
    case, profiles, source_seen = await sync_to_async(_case_page)(user, pk)
    values = {"messages": json.dumps(case.messages, indent=2, ensure_ascii=False),
              "params": json.dumps({k: v for k, v in case.params.items() if k in PARAM_KEYS},
                                   indent=2, ensure_ascii=False),
              "profile": case.profile}
    errors: list[str] = []
    result = None
    if request.method == "POST":
        values = {k: request.POST.get(k, "") for k in values}
        result, errors = await send(values, profiles)
    return await sync_to_async(render)(request, "evals/playground_case.html", {
        "case": case, "source_seen": source_seen, "profiles": profiles, "values": values,
        "errors": errors, "result": result.to_dict() if result else None,
    }, status=400 if errors else 200)
