"""What the gateway keeps besides runs: the admin's model routes, and sessions (one program
run under `manage.py attach`, maybe a replay or a fork of an earlier run)."""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from agentlab.models import Agent, ModelProfile
from traces.models import Run

SESSION_KEY_BYTES = 18


OPEN_FOR = timedelta(days=1)  # a session not ended within a day no longer counts as open


class SessionLimit(ValueError):
    """The user has as many gateway sessions open as one may (the message says so)."""


def ensure_session_room(user: Any) -> None:
    """Refuse (SessionLimit) a new session past AGENTLAB_GATEWAY_MAX_SESSIONS open ones of
    `user` (launchers' and the run page's requests for a runner alike), checked before one is
    made; a session left open by a launcher that died stops counting after a day."""
    limit = settings.AGENTLAB_GATEWAY_MAX_SESSIONS
    since = timezone.now() - OPEN_FOR
    open_now = GatewaySession.objects.filter(user=user, ended_at__isnull=True,
                                             created__gte=since).count()
    if limit > 0 and open_now >= limit:
        raise SessionLimit(f"You have {open_now} gateway sessions open and one user may have "
                           f"{limit} (AGENTLAB_GATEWAY_MAX_SESSIONS): end some first (a "
                           "program under `manage.py attach` ends its own).")


def new_key() -> str:
    return secrets.token_urlsafe(SESSION_KEY_BYTES)


class GatewayRoute(models.Model):
    """A model name a client asks for -> the profile that answers it (and the agent whose
    guardrails apply). A request for a profile's own name needs no route."""

    model_name = models.CharField(
        max_length=200, unique=True,
        help_text="The name clients send as `model` (e.g. gpt-4o-mini), or * for every name "
                  "that has no route and is no profile's name.")
    profile = models.ForeignKey(ModelProfile, on_delete=models.PROTECT, related_name="+")
    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="Its guardrails apply to this traffic (those marked “every agent” always do).")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["model_name"]

    def __str__(self) -> str:
        return f"{self.model_name} → {self.profile}"


class GatewaySession(models.Model):
    """One program under the gateway: its calls make one run. A replay or fork names the run
    it follows; one asked for from a run page waits for the user's runner (`attach --serve`)."""

    MODES = [("record", "record"), ("replay", "replay"), ("fork", "fork")]
    ON_DIVERGENCE = [("live", "go live"), ("stop", "stop")]

    key = models.CharField(max_length=40, unique=True, default=new_key)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="gateway_sessions")
    name = models.CharField(max_length=200, blank=True, help_text="The program, for people.")
    mode = models.CharField(max_length=10, choices=MODES, default="record")
    source = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="+")
    fork_seq = models.PositiveIntegerField(null=True, blank=True)
    edit = models.JSONField(default=dict, blank=True)
    on_divergence = models.CharField(max_length=10, choices=ON_DIVERGENCE, default="live")
    question = models.TextField(blank=True)  # for a runner: what the program is asked
    # Breakpoints from the start (a "debug" frame's fields: step_mode, break_tools, …)
    debug = models.JSONField(default=dict, blank=True)
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL,
                            related_name="gateway_sessions")
    for_runner = models.BooleanField(default=False)  # asked from a page: a runner takes it
    taken_at = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["user", "for_runner", "taken_at"])]

    def __str__(self) -> str:
        return f"{self.mode} session {self.key[:6]}… of {self.user}"


class GatewayRunner(models.Model):
    """When a user's runner (`attach --serve`) last asked for work: a run page says "sent to
    your runner" while one asked within RUNNER_FRESH_S, else shows the command to paste."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                primary_key=True, related_name="+")
    polled_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"runner of {self.user}"
