"""A requested model name -> the profile that answers it and the guardrails that apply.

The profile whose name is the model, else the admin's route for that name, else the route
for `*`, else the embedded model's profile (or the embedded model itself on a fresh install).
Read once per name and cached in the process for FRESH_S, or until a route, profile, agent or
guardrail is saved in this process (signals below): a request pays no query for it, and a
change made through another process is followed within FRESH_S.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from django.db.models import Q
from django.db.models.signals import post_delete, post_save

from agentlab.gateway.models import GatewayRoute
from agentlab.gateway.protocol import upstream_error
from agentlab.guardrail_rows import entry, guardrails_of
from agentlab.guardrails.checks import Check
from agentlab.llm.client import OpenAIChatModel
from agentlab.llm.errors import LLMError
from agentlab.llm.local_server import MODEL_NAME, local_base_url
from agentlab.llm.types import ProfileConfig
from agentlab.models import Agent, Guardrail, ModelProfile
from agentlab.profiles import EMBEDDED_PROFILE, concurrency, to_config

DEFAULT = "*"
MAX_CACHED = 1_000  # routes by model name kept in the process


@dataclass(frozen=True)
class Route:
    profile: ProfileConfig
    checks: tuple[Check, ...]
    agent: str = ""  # the agent whose guardrails apply, if a route names one

    @property
    def input_checks(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.stage == "input")

    @property
    def input_off_loop(self) -> bool:
        """A user's deny-list pattern among the input checks: scanned in a thread."""
        return any(c.kind == "regex" for c in self.input_checks)

    @property
    def has_output_checks(self) -> bool:
        return any(c.stage == "output" for c in self.checks)

    @property
    def model(self) -> OpenAIChatModel:
        if (found := _models.get(self.profile)) is None:
            found = _models[self.profile] = _new_model(self.profile)
        return found


FRESH_S = 5.0
_routes: dict[str, tuple[Route, float]] = {}  # model name -> its route, read at (monotonic)
_models: dict[ProfileConfig, OpenAIChatModel] = {}  # one per profile: its learnt dialect


def cached(model: str) -> Route | None:
    """The route of `model` if this process read it in the last FRESH_S (no thread, no
    query); else None: ask `route` (in a thread)."""
    found = _routes.get(model)
    if found is None or time.monotonic() - found[1] >= FRESH_S:
        return None
    return found[0]


def route(model: str) -> Route:
    """The route of `model` (called in a thread: it may read the database)."""
    if (fresh := cached(model)) is not None:
        return fresh
    if len(_routes) >= MAX_CACHED:  # a client inventing names grows no cache
        _routes.clear()
    found = _read(model)
    _routes[model] = (found, time.monotonic())
    return found


def _read(model: str) -> Route:
    profile = ModelProfile.objects.filter(name=model).first()
    row = None
    if profile is None:
        row = (GatewayRoute.objects.select_related("profile", "agent")
               .filter(model_name__in=(model, DEFAULT))
               .order_by("-model_name").first())  # the exact name sorts after "*"
        profile = row.profile if row is not None else (
            ModelProfile.objects.filter(name=EMBEDDED_PROFILE).first())
    agent = row.agent if row is not None else None
    config = (to_config(profile) if profile is not None else
              ProfileConfig(name=EMBEDDED_PROFILE, base_url=local_base_url(), model=MODEL_NAME))
    return Route(config, _checks(agent), agent.name if agent else "")


def _checks(agent: Agent | None) -> tuple[Check, ...]:
    rows = (guardrails_of(agent) if agent is not None else
            [entry(g) for g in Guardrail.objects.filter(Q(applies_to_all=True), enabled=True)
             .select_related("judge_profile").order_by("name")])
    # Judges do not read gateway traffic: a judge is a model call of its own per message.
    return tuple(Check.from_dict(r) for r in rows if r["kind"] != "judge")


def _new_model(profile: ProfileConfig) -> OpenAIChatModel:
    """The profile's model, its endpoints' limits on requests at once read once (whether an
    endpoint is the embedded model's reads a state file: per call, that was ~0.1 ms of an
    agent's latency): again after FRESH_S, as a route is."""
    limits: dict[ProfileConfig, tuple[int, float]] = {}

    def limit(config: ProfileConfig) -> int:
        found = limits.get(config)
        if found is None or time.monotonic() - found[1] >= FRESH_S:
            found = limits[config] = (concurrency(config), time.monotonic())
        return found[0]

    return OpenAIChatModel(profile, gate_limit=limit)


def forget(**_kwargs: object) -> None:
    """A route, profile, agent or guardrail changed: read them again at the next request."""
    _routes.clear()
    _models.clear()


for _model in (GatewayRoute, ModelProfile, Guardrail, Agent):
    post_save.connect(forget, sender=_model, dispatch_uid=f"gateway-routes-{_model.__name__}")
    post_delete.connect(forget, sender=_model, dispatch_uid=f"gateway-routes-d-{_model.__name__}")


def model_names() -> list[str]:
    """What /v1/models lists: every profile's name and every routed name."""
    names = set(ModelProfile.objects.values_list("name", flat=True))
    names |= set(GatewayRoute.objects.exclude(model_name=DEFAULT)
                 .values_list("model_name", flat=True))
    return sorted(names)


__all__ = ["Route", "cached", "embed", "forget", "model_names", "route"]


async def embed(route: Route, body: dict[str, Any]) -> Any:
    """An embeddings request sent to the route's profile as it is, but for the model name."""
    try:
        return await route.model.post("/embeddings", body)
    except LLMError as exc:
        raise upstream_error(exc) from None
