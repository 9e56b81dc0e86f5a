"""Cases made from runs ("Add to suite"): a run's question, and its answer or a corrected one
as the expected answer, into a suite the user may edit; and an LLM step's request saved as a
playground case ("Add to playground cases").

What a person typed is checked here before anything is written: how many runs one request
adds, the sizes of expected answers, names and tags (a sentence each, naming the run); then
each case as the importer checks a file's rows (`importer.validate`: the scorer, a numeric
expected answer, a regex that compiles safely). Who may read the runs and edit the suite is
the views' business (`case_views.py`): they hand in only rows the user may use.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max

from agentlab.evals import importer
from agentlab.evals.models import Case, PlaygroundCase, Suite, clean_tags
from agentlab.forks.playground import PARAM_KEYS, Request
from traces.models import Run, Step

MAX_RUNS = 100  # runs one request may add (the runs list shows 50 a page)
MAX_EXPECTED_CHARS = 20_000  # an expected answer, as long as the longest chat message
MAX_QUESTION_CHARS = 100_000  # an imported run's question may be longer than any typed one
MAX_TAGS = 20
MAX_TAG_CHARS = 50
MAX_NAME_CHARS = 200  # a suite's or a playground case's name (the columns' length)


class Refused(ValueError):
    """What is wrong with the request, a sentence each; nothing was written."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


@dataclass(frozen=True)
class Draft:
    """One run as the case it becomes: its question and the answer expected."""

    run_id: int
    question: str
    expected: str


def run_ids(values: Sequence[str]) -> list[int]:
    """The runs a request names, counted before any is read."""
    if not values:
        raise Refused(["choose at least one run"])
    if len(values) > MAX_RUNS:
        raise Refused([f"{len(values):,} runs at once, over the limit of {MAX_RUNS}: add them "
                       "in smaller groups"])
    ids = []
    for value in values:
        try:
            ids.append(int(value))
        except ValueError:
            raise Refused([f"run: {value[:20]!r} is not a run number"]) from None
    return list(dict.fromkeys(ids))


def tags_from(text: str) -> list[str]:
    """Comma-separated tags, trimmed, at most MAX_TAGS of at most MAX_TAG_CHARS each."""
    if len(text) > MAX_TAGS * (MAX_TAG_CHARS + 2):  # before splitting it
        raise Refused([f"tags: {len(text):,} characters, over the limit of "
                       f"{MAX_TAGS} tags of {MAX_TAG_CHARS} characters"])
    tags = clean_tags(text.split(","))
    if len(tags) > MAX_TAGS:
        raise Refused([f"tags: {len(tags)} tags, over the limit of {MAX_TAGS}"])
    if long := next((t for t in tags if len(t) > MAX_TAG_CHARS), None):
        raise Refused([f"tags: “{long[:20]}…” is {len(long)} characters, over the limit of "
                       f"{MAX_TAG_CHARS} for a tag"])
    return tags


def new_suite_name(text: str) -> str:
    name = " ".join(text.split())
    if not name:
        raise Refused(["suite: choose a suite, or name the new one"])
    if len(name) > MAX_NAME_CHARS:
        raise Refused([f"suite: the name is {len(name)} characters, over the limit of "
                       f"{MAX_NAME_CHARS}"])
    return name


def drafts(runs: Iterable[Run], expected: dict[int, str]) -> list[Draft]:
    """Each run as a case: `expected[run]` where the person typed one, else its answer.
    A run still going has no answer yet and is refused."""
    problems = [f"run {r.pk} is still {r.status}: add it once it has finished"
                for r in runs if r.is_active]
    if problems:
        raise Refused(problems)
    return [Draft(r.pk, r.input or "", expected.get(r.pk, r.final_answer or "")
                  .replace("\r\n", "\n").strip()) for r in runs]


def check(items: Sequence[Draft], scorer: str, tags: list[str]) -> list[importer.CaseRow]:
    """Each draft as the case row the importer would accept, or Refused with every problem
    (each naming its run)."""
    rows, problems = [], []
    for d in items:
        where = f"run {d.run_id}"
        sizes = []
        if len(d.question) > MAX_QUESTION_CHARS:
            sizes.append(f"{where}: its question is {len(d.question):,} characters, over the "
                         f"limit of {MAX_QUESTION_CHARS:,} for a case")
        if len(d.expected) > MAX_EXPECTED_CHARS:
            sizes.append(f"{where}: the expected answer is {len(d.expected):,} characters, "
                         f"over the limit of {MAX_EXPECTED_CHARS:,}: shorten it")
        if sizes:
            problems += sizes
            continue
        checked = importer.validate({"question": d.question, "expected": d.expected,
                                     "scorer": scorer, "tags": tags}, d.run_id)
        if isinstance(checked, list):
            problems += [f"{where}: {e.field or 'case'}: {e.reason}" for e in checked]
        else:
            rows.append(checked)
    if problems:
        raise Refused(problems)
    return rows


@dataclass(frozen=True)
class Added:
    suite: Suite
    cases: list[Case]
    already: list[Case]  # cases the suite already had from these runs: not added again


@transaction.atomic
def add_to_suite(suite: Suite | str, owner: Any, items: Sequence[Draft],
                 rows: Sequence[importer.CaseRow]) -> Added:
    """Append the checked rows to `suite` (an existing one the caller may edit, or the name
    of a new one `owner` gets), each linked to its run; a run the suite already has a case
    from is left as it is."""
    if isinstance(suite, str):
        if Suite.objects.filter(name=suite).exists():
            raise Refused([f"suite: a suite named “{suite}” already exists: choose it, or "
                           "another name"])
        try:
            with transaction.atomic():
                suite = Suite.objects.create(name=suite, owner=owner)
        except IntegrityError:  # made by someone else meanwhile
            raise Refused([f"suite: a suite named “{suite}” already exists"]) from None
    had = {c.source_run_id: c for c in suite.cases.filter(
        source_run_id__in=[d.run_id for d in items]).order_by("position")}
    start = (suite.cases.aggregate(m=Max("position"))["m"] or 0) + 1
    new = [Case(suite=suite, source_run_id=d.run_id, **row.model_fields())
           for d, row in zip(items, rows, strict=True) if d.run_id not in had]
    for i, case in enumerate(new):
        case.position = start + i
    suite.save(update_fields=["updated"])
    return Added(suite, Case.objects.bulk_create(new), list(had.values()))


# -- playground cases ------------------------------------------------------------------------

def case_fields(run: Run, step: Step, name: str, expected: str) -> tuple[str, str]:
    """A playground case's name (from the run and step when blank) and expected reply,
    checked."""
    problems = []
    name = " ".join(name.split()) or f"Run {run.pk} step {step.seq}"
    if len(name) > MAX_NAME_CHARS:
        problems.append(f"name: {len(name)} characters, over the limit of {MAX_NAME_CHARS}")
    expected = expected.replace("\r\n", "\n").strip()
    if len(expected) > MAX_EXPECTED_CHARS:
        problems.append(f"expected reply: {len(expected):,} characters, over the limit of "
                        f"{MAX_EXPECTED_CHARS:,}")
    if problems:
        raise Refused(problems)
    return name, expected


def save_playground_case(user: Any, run: Run, step: Step, request: Request, *, name: str,
                         expected: str, tags: list[str], profile: str) -> PlaygroundCase:
    """The request (checked by forks.playground.parse_request) saved for `user`; `name` and
    `expected` as `case_fields` returned them."""
    params = {k: v for k, v in request.params.items() if k in PARAM_KEYS}
    return PlaygroundCase.objects.create(
        user=user, name=name, messages=request.messages, params=params,
        profile=profile[:MAX_NAME_CHARS], expected=expected, tags=tags, source_run=run,
        source_seq=step.seq)
