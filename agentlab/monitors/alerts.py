"""Alerts: a threshold on a live scorer's rolling average (or on the failure rate, cost or
time of the runs it watched) over its last N runs. Crossing it opens an episode — one `Alert`
row (at most one open per scorer: a database constraint, so two processes never open two) and
one e-mail, sent by the process whose row it is; recovering closes it, with a "recovered"
e-mail. While the threshold stays crossed nothing more is sent."""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.urls import reverse

from agentlab.monitors import rules
from agentlab.monitors.models import METRICS, Alert, LiveScore, LiveScorer
from traces.schema import ANSWERED_STATUSES

log = logging.getLogger(__name__)
FINISHED = ("done", "error", "unanswered", "skipped")  # every row but a claim in flight


def measure(scorer: LiveScorer) -> tuple[float | None, set[int]]:
    """The scorer's metric over its last `window` runs (None until there are that many), and
    the users whose runs those are."""
    rows = LiveScore.objects.filter(scorer=scorer)
    rows = rows.filter(status="done") if scorer.alert_on == "score" else \
        rows.filter(status__in=FINISHED)
    last = list(rows.order_by("-pk").values("score", "run_status", "run_cost_usd",
                                            "run_wall_ms", "run__user_id")[:scorer.window])
    if len(last) < scorer.window:
        return None, set()
    owners = {r["run__user_id"] for r in last}
    if scorer.alert_on == "score":
        return rules.mean(r["score"] for r in last), owners
    if scorer.alert_on == "run_failures":
        return rules.mean(float(r["run_status"] not in ANSWERED_STATUSES) for r in last), owners
    if scorer.alert_on == "run_cost":
        return rules.mean(r["run_cost_usd"] for r in last), owners
    return rules.mean(r["run_wall_ms"] for r in last if r["run_wall_ms"] is not None), owners


def evaluate(scorer: LiveScorer, now: datetime) -> str | None:
    """Open or close the scorer's episode as its metric says; "open", "close" or None."""
    current = Alert.objects.open().filter(scorer=scorer).first()
    if not scorer.alert_on or scorer.alert_threshold is None:
        value: float | None = None
        change = "close" if current is not None else None  # its alert was switched off
    else:
        value, owners = measure(scorer)
        change = rules.Episode(current is not None).change(
            rules.breached(value, scorer.alert_op, scorer.alert_threshold))  # type: ignore[arg-type]
    if change == "open" and value is not None:
        return "open" if _open(scorer, value, owners, now) else None
    if change == "close" and current is not None:
        return "close" if _close(current, value, now) else None
    if current is not None and value is not None:
        # Once the window holds another user's runs, the alert is staff's alone (for good:
        # it says something of those runs).
        owner = current.owner_id if owners == {current.owner_id} else None
        Alert.objects.filter(pk=current.pk).update(last_value=value, owner_id=owner)
    return None


def _open(scorer: LiveScorer, value: float, owners: set[int], now: datetime) -> bool:
    try:
        with transaction.atomic():
            alert = Alert.objects.create(
                scorer=scorer, metric=scorer.alert_on, op=scorer.alert_op,
                threshold=scorer.alert_threshold, window=scorer.window, value=value,
                last_value=value, owner_id=owners.pop() if len(owners) == 1 else None,
                opened_at=now)
    except IntegrityError:  # another process opened this episode first: its e-mail
        return False
    to = recipients(scorer)
    if _mail(f"Alert: {scorer.name}: {alert.sentence}", _body(alert, opened=True), to):
        Alert.objects.filter(pk=alert.pk).update(emailed_to="\n".join(to))
    return True


def _close(alert: Alert, value: float | None, now: datetime) -> bool:
    if not Alert.objects.filter(pk=alert.pk, closed_at__isnull=True).update(
            closed_at=now, last_value=value if value is not None else alert.last_value):
        return False  # another process closed it
    alert.refresh_from_db()
    if value is not None and alert.emailed_to:  # recovered (not switched off): say so
        sent = _mail(f"Recovered: {alert.scorer.name}", _body(alert, opened=False),
                     alert.emailed_to.split())
        Alert.objects.filter(pk=alert.pk).update(recovered_emailed=sent)
    return True


def recipients(scorer: LiveScorer) -> list[str]:
    listed = [line.strip() for line in scorer.alert_emails.splitlines() if line.strip()]
    if listed:
        return listed
    return list(get_user_model().objects.filter(is_staff=True, is_active=True)
                .exclude(email="").order_by("pk").values_list("email", flat=True)[:50])


def check_addresses(text: str) -> list[str]:
    """The addresses of an `alert_emails` field that are not addresses."""
    bad = []
    for line in filter(None, (x.strip() for x in text.splitlines())):
        try:
            validate_email(line)
        except Exception:
            bad.append(line)
    return bad


def _mail(subject: str, body: str, to: list[str]) -> bool:
    if not to:
        return False
    try:  # Django's mail settings: the outbox in the admin unless EMAIL_BACKEND says otherwise
        send_mail(f"[Agent Lab] {subject}"[:200], body, settings.DEFAULT_FROM_EMAIL, to)
    except Exception:
        log.exception("an alert's e-mail could not be sent")
        return False
    return True


def _body(alert: Alert, *, opened: bool) -> str:
    scorer, page = alert.scorer, reverse("monitors:scorer", args=[alert.scorer_id])
    what = METRICS.get(alert.metric, alert.metric)
    if opened:
        head = (f"{scorer.name} (watching {scorer.watching()}): {what} over the last "
                f"{alert.window} runs is {alert.value:.4g}, "
                f"{'below' if alert.op == 'below' else 'above'} the threshold "
                f"{alert.threshold:g}.\n\nNo other e-mail is sent until it recovers.")
    else:
        head = (f"{scorer.name}: {what} over the last {alert.window} runs is back at "
                f"{alert.last_value:.4g} (threshold {alert.threshold:g}). The alert opened "
                f"{alert.opened_at:%Y-%m-%d %H:%M} UTC is closed.")
    return f"{head}\n\nThe scorer's page: {page}\n"
