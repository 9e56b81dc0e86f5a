"""The runs list's search, filters and sort: a form validates the query string, then
`apply` narrows a queryset. Every parameter is a form field (a whitelist): a bad value is left
out and named in `ignored`, and sort keys never name a column."""

from __future__ import annotations

import re
from datetime import date, datetime, time

from django import forms
from django.db.models import Exists, F, OuterRef, Q, QuerySet
from django.db.models.functions import Coalesce
from django.forms.utils import from_current_timezone
from django.utils import timezone

from traces.display import labels
from traces.models import Run, Step
from traces.schema import FINISHED_STATUSES, RUN_STATUSES

MODEL_LOOKUP = "agent_snapshot__profiles__default__model"
PROFILE_LOOKUP = "agent_snapshot__profiles__default__name"
# The project an imported or received run came from (a header or its resource's attributes).
PROJECT_LOOKUP = "agent_snapshot__imported_from__project"
SORTS = {
    # When it ran: an imported run's own start, not the time it was imported (its `created`).
    "started": (Coalesce(F("started_at"), F("created")),),
    "duration": (F("wall_ms"),),
    "steps": (F("step_count"),),
    "tokens": (F("tokens_in") + F("tokens_out"),),
    "cost": (F("cost_usd"),),
}
DEFAULT_SORT = "-started"
GUARDRAIL_ACTIONS = ("block", "redact", "flag")
ACTED = "any"  # a guardrail choice: any decision that acted (not a judge's "pass")
FINISHED = "finished"  # a status choice: any of FINISHED_STATUSES (what the dashboard counts)
# Older links named the dates date_from/date_to.
ALIASES = {"date_from": "from", "date_to": "to"}
DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")


class MomentField(forms.CharField):
    """An ISO date (a whole day) or date and time; a time without offset is in TIME_ZONE.
    (No max_length: its validator would run on the parsed value.)"""

    def to_python(self, value: object) -> date | datetime | None:  # type: ignore[override]
        text = super().to_python(value)
        if not text:
            return None
        try:
            if DATE_ONLY.fullmatch(text):
                return date.fromisoformat(text)
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise forms.ValidationError(
                f"“{text}” is not a date (2026-12-03) or a date and time (2026-12-03T08:00)."
            ) from None
        return from_current_timezone(moment) if timezone.is_naive(moment) else moment


class RunFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Search")
    agent = forms.ChoiceField(required=False)
    paradigm = forms.ChoiceField(required=False)
    model = forms.ChoiceField(required=False)
    profile = forms.ChoiceField(required=False)
    project = forms.ChoiceField(required=False)
    status = forms.ChoiceField(required=False, label="Status", choices=[
        ("", "any status"), (FINISHED, "finished (any outcome)")] + [
        (s, labels.status_word(s)) for s in RUN_STATUSES])
    tool = forms.CharField(required=False, max_length=200, label="Tool")
    tool_status = forms.ChoiceField(required=False, label="Tool result", choices=[
        ("", "any result"), ("ok", "ok"), ("error", "error")])
    guardrail = forms.CharField(required=False, max_length=200, label="Guardrail")
    guardrail_action = forms.ChoiceField(required=False, label="Guardrail acted", choices=[
        ("", "any or none"), (ACTED, "a guardrail acted"), ("block", "blocked"),
        ("redact", "redacted"), ("flag", "flagged")])
    format_errors = forms.ChoiceField(required=False, label="Format errors",
                                      choices=[("", "any"), ("1", "with format errors")])
    reflections = forms.ChoiceField(required=False, label="Reflections",
                                    choices=[("", "any"), ("1", "with reflections")])
    user = forms.ChoiceField(required=False)
    sort = forms.CharField(required=False)

    def __init__(self, data, *, runs: QuerySet[Run], staff: bool) -> None:  # noqa: ANN001
        data = data.copy()
        for old, new in ALIASES.items():
            if old in data and new not in data:
                data[new] = data.pop(old)[-1]
        super().__init__(data)
        # "from" is a keyword, so the two date fields are added here, not declared above.
        for name, label in (("from", "From"), ("to", "To")):
            self.fields[name] = MomentField(required=False, label=label,
                                            widget=forms.TextInput(attrs={
                                                "placeholder": "2026-12-03 or …T08:00",
                                                "size": 16}))
        # Choices come from the runs this user can see, so nobody learns other users' agents.
        self.fields["agent"].choices = _choices(runs, "agent_name", "any agent")
        self.fields["paradigm"].choices = [
            (key, labels.paradigm_name(key) if key else name)
            for key, name in _choices(runs, "paradigm", "any paradigm")]
        self.fields["model"].choices = _choices(runs, MODEL_LOOKUP, "any model")
        self.fields["profile"].choices = _choices(runs, PROFILE_LOOKUP, "any profile")
        self.fields["project"].choices = _choices(runs, PROJECT_LOOKUP, "any project")
        if staff:
            self.fields["user"].choices = _choices(runs, "user__username", "any user")
        else:
            del self.fields["user"]

    def sort_key(self) -> str:
        sort = (self.cleaned_data.get("sort") if self.is_valid() else "") or DEFAULT_SORT
        return sort if sort.lstrip("-") in SORTS else DEFAULT_SORT

    def ignored(self) -> list[str]:
        """What the page says it left out: one line per bad parameter."""
        self.is_valid()
        return [f"{self.fields[name].label or name.capitalize()}: {' '.join(errors)}"
                for name, errors in self.errors.items() if name in self.fields]


def _choices(runs: QuerySet[Run], lookup: str, blank: str) -> list[tuple[str, str]]:
    values = runs.order_by().values_list(lookup, flat=True).distinct()
    return [("", blank)] + [(v, v) for v in sorted({str(v) for v in values if v})]


def apply(runs: QuerySet[Run], form: RunFilterForm) -> QuerySet[Run]:
    """The runs matching the form's valid fields (an invalid field is ignored, not an error)."""
    form.is_valid()
    data = {k: v for k, v in form.cleaned_data.items() if v not in (None, "")}
    if q := data.get("q"):
        tool_used = Step.objects.filter(run=OuterRef("pk"), kind="tool", name__icontains=q)
        runs = runs.filter(Q(input__icontains=q) | Q(final_answer__icontains=q)
                           | Exists(tool_used))
    if data.get("status") == FINISHED:
        runs = runs.filter(status__in=FINISHED_STATUSES)
        del data["status"]
    for name, lookup in (("agent", "agent_name"), ("paradigm", "paradigm"),
                         ("model", MODEL_LOOKUP), ("profile", PROFILE_LOOKUP),
                         ("project", PROJECT_LOOKUP),
                         ("status", "status"), ("user", "user__username")):
        if name in data:
            runs = runs.filter(**{lookup: data[name]})
    if "format_errors" in data:
        runs = runs.filter(format_errors__gt=0)
    if "reflections" in data:
        runs = runs.filter(reflections__gt=0)
    if "tool" in data or "tool_status" in data:
        runs = runs.filter(Exists(tool_calls(data.get("tool"), data.get("tool_status"))))
    if "guardrail" in data or "guardrail_action" in data:
        runs = runs.filter(Exists(guardrail_decisions(data.get("guardrail"),
                                                      data.get("guardrail_action"))))
    tz = timezone.get_current_timezone()
    if start := data.get("from"):
        if not isinstance(start, datetime):
            start = datetime.combine(start, time.min, tz)
        runs = runs.filter(created__gte=start)
    if end := data.get("to"):
        if not isinstance(end, datetime):
            end = datetime.combine(end, time.max, tz)  # a date: to the end of that day
        runs = runs.filter(created__lte=end)
    return order(runs, form.sort_key())


def tool_calls(name: str | None, status: str | None) -> QuerySet[Step]:
    """A run's calls of a tool, as the dashboard counts them: a ReWOO worker reusing an earlier
    result is no call. An Exists over these keeps one row per run (a join would repeat it)."""
    steps = Step.objects.filter(run=OuterRef("pk"), kind="tool", status__in=("ok", "error"))
    if name:
        steps = steps.filter(name=name)
    if status:
        steps = steps.filter(status=status)
    return steps.exclude(meta__has_key="reused")


def guardrail_decisions(name: str | None, action: str | None) -> QuerySet[Step]:
    """A run's guardrail decisions that acted (blocked, redacted, flagged), as the dashboard
    counts them; `action` narrows to one of those."""
    steps = Step.objects.filter(run=OuterRef("pk"), kind="guardrail",
                                meta__action__in=GUARDRAIL_ACTIONS)
    if name:
        steps = steps.filter(name=name)
    if action and action != ACTED:
        steps = steps.filter(meta__action=action)
    return steps


def order(runs: QuerySet[Run], sort: str) -> QuerySet[Run]:
    expressions = SORTS[sort.lstrip("-")]
    if sort.startswith("-"):
        ordering = [e.desc(nulls_last=True) for e in expressions]
    else:
        ordering = [e.asc(nulls_last=True) for e in expressions]
    return runs.order_by(*ordering, "-pk")
