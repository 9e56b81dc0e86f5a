"""ModelProfile rows -> pure `ProfileConfig`s and chat models (the only ORM -> llm bridge)."""

from __future__ import annotations

import dataclasses

from django.conf import settings

from agentlab.llm.client import OpenAIChatModel
from agentlab.llm.local_server import CONTEXT_TOKENS, MODEL_NAME, local_base_url
from agentlab.llm.types import ProfileConfig
from agentlab.models import ModelProfile

EMBEDDED_PROFILE = "Local SmolLM2"  # the embedded model's profile that `setup` makes


def to_config(
    profile: ModelProfile, *, resolve_local: bool = True, _seen: frozenset[int] = frozenset()
) -> ProfileConfig:
    """Freeze a profile (and its fallback chain, cycles cut) into plain data.

    `resolve_local=False` keeps the embedded model's base URL blank (for snapshots: its port can
    change between launches); `resolve_url` fills it in when the snapshot runs.
    """
    fallback = None
    if profile.fallback_id and profile.fallback_id not in _seen | {profile.pk}:
        fallback = to_config(profile.fallback, resolve_local=resolve_local,
                             _seen=_seen | {profile.pk})
    return ProfileConfig(
        name=profile.name,
        base_url=profile.base_url or (local_base_url() if resolve_local else ""),
        model=profile.model or MODEL_NAME,
        api_key_env=profile.api_key_env,
        temperature=profile.temperature,
        max_tokens=profile.max_tokens,
        context_tokens=profile.context_tokens or (None if profile.base_url else CONTEXT_TOKENS),
        timeout_s=profile.timeout_s,
        retries=profile.retries,
        price_in_per_m=float(profile.price_in_per_m),
        price_out_per_m=float(profile.price_out_per_m),
        fallback=fallback,
    )


def resolve_url(config: ProfileConfig) -> ProfileConfig:
    """Fill in the embedded model's current URL wherever a chain has a blank one (and its
    window, for a snapshot frozen before profiles had one)."""
    fallback = resolve_url(config.fallback) if config.fallback else None
    embedded = not config.base_url
    return dataclasses.replace(
        config, base_url=config.base_url or local_base_url(), fallback=fallback,
        context_tokens=config.context_tokens or (CONTEXT_TOKENS if embedded else None))


def chat_model(profile: ModelProfile) -> OpenAIChatModel:
    return model_for(to_config(profile))


def model_for(config: ProfileConfig) -> OpenAIChatModel:
    """The chat model of a profile, sending its endpoint no more requests at once than the
    settings allow (the rest wait their turn: agentlab/llm/gate.py)."""
    return OpenAIChatModel(config, gate_limit=concurrency)


def concurrency(config: ProfileConfig) -> int:
    """How many requests this process sends `config`'s endpoint at once (0: no limit): the
    embedded model's `AGENTLAB_EMBEDDED_MODEL_CONCURRENCY` (1: llama.cpp answers one at a
    time), any other's `AGENTLAB_MODEL_CONCURRENCY`."""
    if is_embedded(config.base_url):
        return settings.AGENTLAB_EMBEDDED_MODEL_CONCURRENCY
    return settings.AGENTLAB_MODEL_CONCURRENCY


def is_embedded(base_url: str) -> bool:
    """Whether `base_url` is the embedded model's (blank: a snapshot's, filled in when it runs)."""
    return not base_url or base_url.rstrip("/") == local_base_url().rstrip("/")
