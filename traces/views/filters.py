"""The runs list's search, filters and sort: a form validates the query string, then
`apply` narrows a queryset. Sort keys are a whitelist: a query string never names a column."""

from __future__ import annotations

from datetime import datetime, time

from django import forms
from django.db.models import Exists, F, OuterRef, Q, QuerySet
from django.utils import timezone

from traces.models import Run, Step
from traces.schema import RUN_STATUSES

MODEL_LOOKUP = "agent_snapshot__profiles__default__model"
SORTS = {
    "started": (F("created"),),
    "duration": (F("wall_ms"),),
    "steps": (F("step_count"),),
    "tokens": (F("tokens_in") + F("tokens_out"),),
    "cost": (F("cost_usd"),),
}
DEFAULT_SORT = "-started"


class RunFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Search")
    agent = forms.ChoiceField(required=False)
    paradigm = forms.ChoiceField(required=False)
    model = forms.ChoiceField(required=False)
    status = forms.ChoiceField(required=False, choices=[("", "any status")] + [
        (s, s.replace("_", " ")) for s in RUN_STATUSES])
    date_from = forms.DateField(required=False, label="From",
                                widget=forms.DateInput(attrs={"type": "date"}))
    date_to = forms.DateField(required=False, label="To",
                              widget=forms.DateInput(attrs={"type": "date"}))
    user = forms.ChoiceField(required=False)
    sort = forms.CharField(required=False)

    def __init__(self, data, *, runs: QuerySet[Run], staff: bool) -> None:  # noqa: ANN001
        super().__init__(data)
        # Choices come from the runs this user can see, so nobody learns other users' agents.
        self.fields["agent"].choices = _choices(runs, "agent_name", "any agent")
        self.fields["paradigm"].choices = _choices(runs, "paradigm", "any paradigm")
        self.fields["model"].choices = _choices(runs, MODEL_LOOKUP, "any model")
        if staff:
            self.fields["user"].choices = _choices(runs, "user__username", "any user")
        else:
            del self.fields["user"]

    def sort_key(self) -> str:
        sort = (self.cleaned_data.get("sort") if self.is_valid() else "") or DEFAULT_SORT
        return sort if sort.lstrip("-") in SORTS else DEFAULT_SORT


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
    for name, lookup in (("agent", "agent_name"), ("paradigm", "paradigm"),
                         ("model", MODEL_LOOKUP), ("status", "status"),
                         ("user", "user__username")):
        if name in data:
            runs = runs.filter(**{lookup: data[name]})
    tz = timezone.get_current_timezone()
    if "date_from" in data:
        runs = runs.filter(created__gte=datetime.combine(data["date_from"], time.min, tz))
    if "date_to" in data:
        runs = runs.filter(created__lte=datetime.combine(data["date_to"], time.max, tz))
    return order(runs, form.sort_key())


def order(runs: QuerySet[Run], sort: str) -> QuerySet[Run]:
    expressions = SORTS[sort.lstrip("-")]
    if sort.startswith("-"):
        ordering = [e.desc(nulls_last=True) for e in expressions]
    else:
        ordering = [e.asc(nulls_last=True) for e in expressions]
    return runs.order_by(*ordering, "-pk")
