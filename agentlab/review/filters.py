"""A runs-list filter (its query string) as the runs a queue is filled with: the runs list's
own form and `apply` (traces/views/filters.py), so any filter of the list fills a queue.

Two differences from the list: the runs are those the queue's owner sees (staff: all), and a
filter with a field the form refuses is refused whole here: the list leaves a bad field out
(and says so), which for a rule would widen it to every run. A value of agent, paradigm,
model, profile, project or user is taken as it is, so a rule may name an agent that has not
run yet."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import QueryDict

from traces.models import Run
from traces.views import filters

MAX_QUERY_CHARS = 2000
OPEN_CHOICES = ("agent", "paradigm", "model", "profile", "project", "user")
IGNORED = ("page", "sort")  # how the list is shown, not which runs


class FilterError(ValueError):
    """A filter that cannot fill a queue; the message says why."""


def clean_query(query: str) -> str:
    """The query string without paging and sorting, its fields in a stable order."""
    if len(query) > MAX_QUERY_CHARS:
        raise FilterError(f"The filter is {len(query):,} characters, over the limit of "
                          f"{MAX_QUERY_CHARS:,}.")
    data = QueryDict(query.lstrip("?"), mutable=True)
    for name in IGNORED:
        data.pop(name, None)
    kept = QueryDict(mutable=True)
    for name in sorted(data):
        values = [v for v in data.getlist(name) if v.strip()]
        if values:
            kept.setlist(name, values[-1:])
    return kept.urlencode()


def form_for(query: str) -> filters.RunFilterForm:
    data = QueryDict(clean_query(query))
    form = filters.RunFilterForm(data, runs=Run.objects.none(), staff=True)
    for name in OPEN_CHOICES:
        if value := data.get(name):
            form.fields[name].choices = [("", ""), (value, value)]
    if problems := form.ignored():
        raise FilterError("; ".join(problems))
    unknown = set(data) - set(form.fields)
    if unknown:
        raise FilterError(f"Not a filter of the runs list: {', '.join(sorted(unknown))}.")
    return form


def check(query: str) -> str:
    """The query, cleaned, if it is a filter that can fill a queue; else FilterError."""
    form_for(query)
    return clean_query(query)


def runs_matching(owner: Any, query: str) -> QuerySet[Run]:
    """The runs `owner` sees that the filter keeps (FilterError: not a filter)."""
    return filters.apply(Run.objects.visible_to(owner), form_for(query))


def described(query: str) -> list[tuple[str, str]]:
    """The filter's fields in words, for the pages: [("Agent", "Calc agent"), …]."""
    data = QueryDict(clean_query(query))
    try:
        form = form_for(query)
    except FilterError:
        return [(name, data[name]) for name in data]
    return [(str(form.fields[name].label or name.capitalize()), data[name]) for name in data
            if name in form.fields]
