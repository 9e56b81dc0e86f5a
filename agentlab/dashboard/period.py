"""The dashboard's query string: which period and how to group, validated by a form, and the
runs-list filters (traces/views/filters.py) that show the runs behind a figure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Literal
from urllib.parse import urlencode

from django import forms
from django.urls import reverse
from django.utils import timezone

GroupBy = Literal["agent", "paradigm", "profile", "model"]
PERIODS = {"24h": ("last 24 h", timedelta(hours=24)), "7d": ("last 7 days", timedelta(days=7)),
           "30d": ("last 30 days", timedelta(days=30)), "all": ("all time", None)}
DEFAULT_PERIOD = "7d"
# The runs list's filter of the same name: the dashboard groups by what it can link to.
GROUPS = {"agent": "agent", "paradigm": "paradigm", "profile": "model profile",
          "model": "model (as the profile names it)"}
DEFAULT_GROUP = "agent"


class DashboardForm(forms.Form):
    period = forms.ChoiceField(required=False, choices=[(k, v[0]) for k, v in PERIODS.items()])
    date_from = forms.DateField(required=False, label="From",
                                widget=forms.DateInput(attrs={"type": "date"}))
    date_to = forms.DateField(required=False, label="To",
                              widget=forms.DateInput(attrs={"type": "date"}))
    group = forms.ChoiceField(required=False, label="Group by", choices=list(GROUPS.items()))

    def clean(self) -> dict:
        data = super().clean()
        start, end = data.get("date_from"), data.get("date_to")
        if start and end and start > end:
            raise forms.ValidationError("“From” is after “To”.")
        return data

    def chosen(self, now: datetime | None = None) -> Period:
        """The chosen period; dates (from/to) win over a named period; bad input = defaults."""
        data = self.cleaned_data if self.is_valid() else {}
        group = data.get("group") or DEFAULT_GROUP
        tz = timezone.get_current_timezone()
        if data.get("date_from") or data.get("date_to"):
            start = data.get("date_from") and datetime.combine(data["date_from"], time.min, tz)
            end = data.get("date_to") and datetime.combine(data["date_to"], time.max, tz)
            return Period("custom", start or None, end or None, group)  # type: ignore[arg-type]
        key = data.get("period") or DEFAULT_PERIOD
        span = PERIODS[key][1]
        # Whole seconds, so that the runs list's "from" (an ISO instant) selects the same runs.
        now = (now or timezone.now()).replace(microsecond=0)
        return Period(key, now - span if span else None, None, group)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Period:
    key: str  # a PERIODS key or "custom"
    start: datetime | None
    end: datetime | None
    group: GroupBy

    @property
    def label(self) -> str:
        if self.key in PERIODS:
            return PERIODS[self.key][0]
        fmt = "%Y-%m-%d"
        return (f"{self.start.strftime(fmt) if self.start else '…'} – "
                f"{self.end.strftime(fmt) if self.end else 'now'}")

    def date_params(self) -> dict[str, str]:
        """The runs list's from/to for exactly this period: whole days for chosen dates, the
        instant (to the second, as `chosen` rounds it) for a rolling period."""
        tz = timezone.get_current_timezone()
        params = {}
        for name, moment in (("from", self.start), ("to", self.end)):
            if moment is None:
                continue
            local = moment.astimezone(tz)
            params[name] = (local.date().isoformat() if self.key == "custom"
                            else local.isoformat(timespec="seconds"))
        return params

    def runs_url(self, group_value: str | None = None, **filters: str) -> str:
        """The runs list narrowed to this period, one group (when given) and `filters`."""
        params = self.date_params()
        if group_value:
            params[self.group] = group_value
        params.update({k: v for k, v in filters.items() if v})
        return f"{reverse('runs')}?{urlencode(params)}" if params else reverse("runs")
