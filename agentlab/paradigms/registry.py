"""The Paradigm base class and the registry of paradigms by key (pure)."""

from __future__ import annotations

import copy
import importlib
import logging
import pkgutil
from typing import TYPE_CHECKING, Any, ClassVar

import jsonschema

if TYPE_CHECKING:
    from agentlab.runtime.context import RunContext

log = logging.getLogger(__name__)

_REGISTRY: dict[str, type[Paradigm]] = {}
_IMPORT_ERRORS: dict[str, str] = {}
_discovered = False


class Paradigm:
    """One reasoning paradigm: the control flow of its paper; the runtime does the rest."""

    key: ClassVar[str]
    label: ClassVar[str] = ""
    params_schema: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    async def run(self, ctx: RunContext, task: str) -> str:
        """Solve `task` through `ctx` and return the final answer."""
        raise NotImplementedError

    def params_of(self, ctx: RunContext) -> dict[str, Any]:
        """ctx.params over the schema's defaults (a snapshot has them filled in already; a
        sub-run or a test may pass only some)."""
        defaults = {k: copy.deepcopy(v["default"])
                    for k, v in self.params_schema.get("properties", {}).items() if "default" in v}
        return {**defaults, **ctx.params}

    def partial_answer(self, ctx: RunContext, reason: str) -> str:
        """What to answer when the run stops early (budget, loop, timeout, cancel)."""
        findings = [f for f in ctx.findings if f.strip()]
        if not findings:
            return f"I stopped before finding an answer ({reason})."
        lines = "\n".join(f"- {_clip(f)}" for f in findings[-5:])
        return f"I stopped before finishing ({reason}). What I found so far:\n{lines}"


def _clip(text: str, limit: int = 500) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def register_paradigm(cls: type[Paradigm]) -> type[Paradigm]:
    """Class decorator: make `cls` available under `cls.key`."""
    key = getattr(cls, "key", "")
    if not key:
        raise TypeError(f"{cls.__name__} needs a `key` class attribute")
    other = _REGISTRY.get(key)
    if other is not None and other.__qualname__ != cls.__qualname__:
        raise ValueError(f"paradigm key {key!r} is taken by {other.__qualname__}")
    jsonschema.Draft202012Validator.check_schema(cls.params_schema)
    _REGISTRY[key] = cls
    return cls


def _discover() -> None:
    # Paradigm modules register themselves on import; import every public module of the package
    # once, so `get_paradigm("react")` works without the caller knowing module names.
    global _discovered
    if _discovered:
        return
    _discovered = True
    import agentlab.paradigms as package

    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_") or info.ispkg:  # parts and parsing/ register nothing
            continue
        name = f"{package.__name__}.{info.name}"
        try:
            importlib.import_module(name)
        except Exception as exc:  # one broken paradigm must not hide the others
            log.exception("could not import paradigm module %s", name)
            _IMPORT_ERRORS[info.name] = f"{type(exc).__name__}: {exc}"


def paradigm_keys() -> list[str]:
    _discover()
    return sorted(_REGISTRY)


def get_paradigm(key: str) -> type[Paradigm]:
    _discover()
    try:
        return _REGISTRY[key]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        broken = "".join(f"; module {m} failed to import ({e})" for m, e in _IMPORT_ERRORS.items())
        raise KeyError(f"unknown paradigm {key!r}; known paradigms: {known}{broken}") from None


def validate_params(key: str, params: dict[str, Any] | None) -> dict[str, Any]:
    """Check `params` against the paradigm's schema; returns a copy with defaults filled in."""
    schema = get_paradigm(key).params_schema
    filled = copy.deepcopy(dict(params or {}))
    for name, prop in schema.get("properties", {}).items():
        if name not in filled and "default" in prop:
            filled[name] = copy.deepcopy(prop["default"])
    # The format checker makes "format": "regex" (and the like) checked, not just annotations.
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    error = jsonschema.exceptions.best_match(validator.iter_errors(filled))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "params"
        raise ValueError(f"invalid parameter for {key} — {where}: {error.message}")
    return filled
