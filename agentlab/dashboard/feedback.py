"""Feedback over time, per agent (or whatever the dashboard groups by): one aggregate query,
bucketed by hour, day or week so a chart has at most MAX_BUCKETS bars.

It counts the feedback given within the period on the runs the visitor may see (feedback
follows its run), whenever those runs ran: "what did people say this week"."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.db.models import Count, Q
from django.db.models.functions import TruncDate, TruncHour
from django.utils import timezone

from agentlab.dashboard.period import Period
from agentlab.dashboard.queries import group_expr
from agentlab.feedback.models import Feedback
from agentlab.feedback.values import THUMBS

MAX_BUCKETS = 62
MAX_SERIES = 8  # groups drawn apart; the rest are summed as "other"
OTHER = "(other)"


@dataclass
class FeedbackFigures:
    labels: list[str]  # one per bucket
    series: dict[str, list[int]]  # group -> feedback given per bucket
    up: list[int]
    down: list[int]
    total: int


def over_time(user, period: Period, now: datetime | None = None) -> FeedbackFigures:  # noqa: ANN001
    rows = Feedback.objects.visible_to(user)
    if period.start:
        rows = rows.filter(created__gte=period.start)
    if period.end:
        rows = rows.filter(created__lte=period.end)
    tz = timezone.get_current_timezone()
    now = timezone.localtime(now or timezone.now())
    start = timezone.localtime(period.start) if period.start else None
    end = timezone.localtime(period.end) if period.end else now
    hourly = start is not None and end - start <= timedelta(days=2)
    trunc = TruncHour("created", tzinfo=tz) if hourly else TruncDate("created", tzinfo=tz)
    counted = (rows.order_by().annotate(bucket=trunc, g=group_expr(period.group, "run__"))
               .values("bucket", "g")
               .annotate(n=Count("pk"), up=Count("pk", filter=Q(name=THUMBS, label="up")),
                         down=Count("pk", filter=Q(name=THUMBS, label="down"))))
    counted = list(counted)
    if not counted:
        return FeedbackFigures([], {}, [], [], 0)
    first = start or min(_moment(r["bucket"], tz) for r in counted)
    buckets, label_of, key_of = _buckets(first, end, hourly)
    index = {b: i for i, b in enumerate(buckets)}
    totals: dict[str, int] = {}
    for r in counted:
        totals[r["g"] or "(none)"] = totals.get(r["g"] or "(none)", 0) + r["n"]
    shown = sorted(totals, key=lambda g: (-totals[g], g))[:MAX_SERIES]
    series = {g: [0] * len(buckets) for g in sorted(shown)}
    up, down = [0] * len(buckets), [0] * len(buckets)
    for r in counted:
        i = index.get(key_of(_moment(r["bucket"], tz)))
        if i is None:
            continue
        group = r["g"] or "(none)"
        if group not in series:
            group = OTHER
            series.setdefault(OTHER, [0] * len(buckets))
        series[group][i] += r["n"]
        up[i] += r["up"]
        down[i] += r["down"]
    return FeedbackFigures([label_of(b) for b in buckets], series, up, down,
                           sum(totals.values()))


def _moment(value: date | datetime, tz) -> datetime:  # noqa: ANN001
    if isinstance(value, datetime):
        return timezone.localtime(value, tz) if timezone.is_aware(value) else value.replace(
            tzinfo=tz)
    return datetime(value.year, value.month, value.day, tzinfo=tz)


def _buckets(first: datetime, last: datetime, hourly: bool):  # noqa: ANN202
    """The buckets from `first` to `last` (hours, days, or weeks past MAX_BUCKETS days), how
    each reads, and which bucket a moment falls in."""
    if hourly:
        start = first.replace(minute=0, second=0, microsecond=0)
        hours = int((last - start).total_seconds() // 3600) + 1
        buckets = [start + timedelta(hours=h) for h in range(min(hours, MAX_BUCKETS))]
        return (buckets, lambda b: f"{b:%d %H}h",
                lambda m: m.replace(minute=0, second=0, microsecond=0))
    days = (last.date() - first.date()).days + 1
    step = 1 if days <= MAX_BUCKETS else 7
    origin = first.date()
    buckets = [origin + timedelta(days=d) for d in range(0, days, step)][-MAX_BUCKETS:]

    def key_of(moment: datetime) -> date:
        offset = (moment.date() - origin).days
        return origin + timedelta(days=offset - offset % step)

    fmt = "%m-%d" if step == 1 else "week of %m-%d"
    return buckets, lambda b: b.strftime(fmt), key_of
