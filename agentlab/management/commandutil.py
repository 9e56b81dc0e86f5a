"""What the terminal commands share: finding agents and users, starting the embedded model."""

from __future__ import annotations

import urllib.request
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.db.models import QuerySet

from agentlab.models import Agent, ModelProfile


def find_named(rows: QuerySet, ref: str, what: str, *, none: str = "none") -> Any:
    """The row named `ref` (or with id `ref`), or a CommandError listing the names there are."""
    found = rows.filter(name=ref).first() or (
        rows.filter(pk=int(ref)).first() if ref.isdigit() else None
    )
    if found is None:
        names = ", ".join(repr(n) for n in rows.model.objects.values_list("name", flat=True))
        raise CommandError(f"No {what} named {ref!r}. {what.capitalize()}s: {names or none}")
    return found


def find_agent(ref: str) -> Agent:
    """An agent by name or id, or a CommandError listing the agents there are."""
    return find_named(Agent.objects.select_related("model_profile"), ref, "agent",
                      none="none (run setup)")


def find_user(username: str | None) -> Any:
    """The named user, else the first admin (the default owner of terminal runs)."""
    User = get_user_model()
    if username:
        try:
            return User.objects.get(username=username)
        except User.DoesNotExist:
            raise CommandError(f"No user named {username!r}.") from None
    admin = User.objects.filter(is_superuser=True).order_by("pk").first()
    if admin is None:
        raise CommandError("No admin user yet: run `manage.py setup` first.")
    return admin


def needs_embedded(agents: list[Agent], also: tuple[ModelProfile | None, ...] = ()) -> bool:
    """True when one of the agents (or the `also` profiles, e.g. a judge) uses the embedded
    model and it is not answering."""
    uses = [p for a in agents for p in (a.model_profile, *(rp.profile for rp in
                                                           a.role_profiles.all()))]
    uses += [p for p in also if p is not None]
    return any(p.is_embedded for p in uses) and not embedded_answers()


def embedded_answers() -> bool:
    """Whether the embedded model's server answers where the embedded profile looks for it."""
    from agentlab.llm.local_server import local_base_url

    try:
        urllib.request.urlopen(local_base_url() + "/models", timeout=2).close()
        return True
    except OSError:
        return False


def start_embedded(stdout: Any) -> Any:
    """Start the embedded model on a free port for this command; the caller stops it."""
    from agentlab.llm.local_server import LocalModelError, LocalModelServer

    stdout.write("Starting the embedded model for this command…")
    server = LocalModelServer(port=0)
    try:
        server.start()
    except LocalModelError as exc:
        raise CommandError(str(exc)) from None
    return server


def warm_agents(agents: Any, stdout: Any) -> None:
    """Each of `agents` that runs on the embedded model sends its first request once, so the
    first question asked of it does not wait for the model to read its prompt
    (agentlab.runs.warm)."""
    from agentlab.runs.warm import warm

    for agent in agents:
        if agent.model_profile is not None and agent.model_profile.is_embedded:
            seconds = warm(agent)
            stdout.write(f"  warmed {agent.name} in {seconds:.1f} s")
