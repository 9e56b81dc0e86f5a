"""Declarations -> Agent rows. Each @agent becomes an ordinary Agent row marked with its
`code_ref` ("path:line"), so chat, compare, evals, replay and the dashboard treat it like any
other; the admin shows it read-only. Discovery imports every installed app's `agents.py` (as
the admin's autodiscover imports `admin.py`)."""

from __future__ import annotations

import re
from pathlib import Path

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.module_loading import autodiscover_modules

from agentlab.code_agents.declaration import EMBEDDED, LIMITS, REGISTRY, Declaration
from agentlab.models import Agent, ModelProfile, Tool
from agentlab.paths import REPO_ROOT
from agentlab.profiles import EMBEDDED_PROFILE
from agentlab.tool_rows import sync_tools


class DeclarationError(ValueError):
    """A declaration that cannot become a row (unknown profile or tool, a name taken by an
    agent made in the admin, parameters the paradigm refuses); the message says which."""


def discover() -> None:
    """Import `<app>.agents` of every installed app (AppConfig.ready): the declarations
    register themselves; no database is touched."""
    autodiscover_modules("agents")


def sync_all() -> tuple[list[str], list[str]]:
    """A row for every declaration whose profile and tools exist (post_migrate, setup, serve)
    -> (names synced, why the others were not); those are synced when first called."""
    done, problems = [], []
    for declaration in list(REGISTRY.values()):
        try:
            sync(declaration)
        except DeclarationError as exc:
            problems.append(f"{declaration.name}: {exc}")
            continue
        done.append(declaration.name)
    return done, problems


@transaction.atomic
def sync(declaration: Declaration) -> Agent:
    """The declaration's Agent row, created or brought up to date (DeclarationError when it
    cannot be)."""
    row = Agent.objects.filter(name=declaration.name).first()
    if row is not None and not row.code_ref:
        raise DeclarationError(f"an agent named {declaration.name!r} was made in the admin; "
                               f"give the one at {declaration.code_ref} another name=…")
    row = row or Agent(name=declaration.name)
    row.code_ref = declaration.code_ref
    row.paradigm = declaration.paradigm
    row.description = declaration.description
    row.demo_question = declaration.demo_question
    row.system_prompt = declaration.system_prompt
    row.model_profile = _profile(declaration)
    row.params = dict(declaration.params)
    for name in LIMITS:
        setattr(row, name, declaration.limits.get(name, Agent._meta.get_field(name).get_default()))
    try:
        row.full_clean()
    except ValidationError as exc:
        raise DeclarationError(f"{declaration.code_ref}: {_messages(exc)}") from None
    row.save()
    row.tools.set(_tools(declaration))
    row.role_profiles.all().delete()  # a code agent has one model (a role's would be the admin's)
    return row


def _profile(declaration: Declaration) -> ModelProfile:
    name = EMBEDDED_PROFILE if declaration.model == EMBEDDED else declaration.model
    profile = ModelProfile.objects.filter(name=name).first()
    if profile is None:
        names = ", ".join(ModelProfile.objects.values_list("name", flat=True)) or "none"
        raise DeclarationError(f"{declaration.code_ref}: no model profile named {name!r} "
                               f"(profiles: {names}; model={EMBEDDED!r} is {EMBEDDED_PROFILE!r}, "
                               "which `manage.py setup` makes)")
    return profile


def _tools(declaration: Declaration) -> list[Tool]:
    rows = {t.name: t for t in Tool.objects.filter(name__in=declaration.tools)}
    if set(declaration.tools) - set(rows):
        sync_tools()  # a tool registered by code since the last migrate gets its row now
        rows = {t.name: t for t in Tool.objects.filter(name__in=declaration.tools)}
    if missing := [n for n in declaration.tools if n not in rows]:
        raise DeclarationError(f"{declaration.code_ref}: no tool named "
                               f"{', '.join(map(repr, missing))} (an @tool function, or the "
                               "name of a built-in or MCP tool)")
    return list(rows.values())


def _messages(exc: ValidationError) -> str:
    if hasattr(exc, "message_dict"):
        return "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items())
    return " ".join(exc.messages)


def is_declared(row: Agent) -> bool:
    """Whether code still declares the row's agent (else the admin may delete it): this
    process's declaration, or an `@agent` still at the row's path:line (a script, e.g.
    examples/travel.py, that the web server never imports)."""
    declaration = REGISTRY.get(row.name)
    if declaration is not None and declaration.code_ref == row.code_ref:
        return True
    return still_in_source(row.code_ref)


def still_in_source(code_ref: str) -> bool:
    """Whether the file at "path:line" (relative to the repository, or absolute) still has an
    `@agent` decorator there (a decorated function's first line is its first decorator's)."""
    path, _, line = (code_ref or "").rpartition(":")
    if not path or not line.isdigit():
        return False
    file = Path(path) if Path(path).is_absolute() else REPO_ROOT / path
    try:
        lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return False
    number = int(line)
    return 0 < number <= len(lines) and bool(_DECORATOR.match(lines[number - 1]))


_DECORATOR = re.compile(r"\s*@(?:[\w.]*\.)?agent\b")
