"""Sub-runs inside one run: the scope a sub-agent's steps are emitted in (pure).

A Plan-and-Execute executor, a Multi-Agent member or a Reflexion attempt is another paradigm run
on the same RunContext, so its steps, budgets and totals are the run's; the scope gives its steps
their parent and role and lets it see its own prompt, params, history and tools.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agentlab.llm.types import ChatModel
    from agentlab.tools.executor import ToolExecutor


class ParadigmRun(Protocol):
    """What the runtime needs of a paradigm instance (agentlab.paradigms.registry.Paradigm)."""

    async def run(self, ctx: Any, task: str) -> str: ...

    def partial_answer(self, ctx: Any, reason: str) -> str: ...


class ParadigmLookup(Protocol):
    """How a run finds another paradigm by key for a sub-run. The runtime is below the
    paradigms, so the lookup is handed in (the module agentlab.paradigms.registry is one)."""

    def get_paradigm(self, key: str) -> Callable[[], ParadigmRun]: ...

    def validate_params(self, key: str, params: dict[str, Any] | None) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Scope:
    """Defaults for the steps emitted inside `ctx.scope(...)`: a sub-run's role and parent, and
    the prompt, params, history and tools it runs with (None = the run's own)."""

    role: str | None = None
    parent: int | None = None
    params: dict[str, Any] | None = None
    system_prompt: str | None = None
    history: list[dict[str, Any]] | None = None
    executor: ToolExecutor | None = None
    models: Mapping[str, ChatModel] | None = None  # a sub-agent's own models ("default", roles)
    attrs: dict[str, Any] = field(default_factory=dict)


_NO_SCOPE = Scope()


@dataclass(frozen=True)
class AgentSpec:
    """Another configured agent this run may call as a sub-agent (a Multi-Agent member):
    its paradigm, params, prompt, tools and models (None: the run's)."""

    name: str
    paradigm: str
    params: dict[str, Any] = field(default_factory=dict)
    system_prompt: str = ""
    executor: ToolExecutor | None = None
    models: Mapping[str, ChatModel] | None = None  # None: the run's models


class ScopedContext:
    """The scope half of RunContext: the attributes a sub-run may see differently."""

    models: Mapping[str, ChatModel]
    _params: dict[str, Any]
    _system_prompt: str
    _history: list[dict[str, Any]]
    _executor: ToolExecutor
    paradigms: ParadigmLookup | None

    def _init_scope(self) -> None:
        # A context variable, not an attribute: concurrent sub-runs (asyncio tasks) each see
        # their own scope.
        self._scope: contextvars.ContextVar[Scope] = contextvars.ContextVar(
            f"scope-{id(self)}", default=_NO_SCOPE)

    @property
    def params(self) -> dict[str, Any]:
        scoped = self._scope.get().params
        return self._params if scoped is None else scoped

    @params.setter
    def params(self, value: dict[str, Any]) -> None:
        self._params = dict(value)

    @property
    def system_prompt(self) -> str:
        scoped = self._scope.get().system_prompt
        return self._system_prompt if scoped is None else scoped

    @system_prompt.setter
    def system_prompt(self, value: str) -> None:
        self._system_prompt = value

    @property
    def history(self) -> list[dict[str, Any]]:
        scoped = self._scope.get().history
        return self._history if scoped is None else scoped

    @history.setter
    def history(self, value: list[dict[str, Any]]) -> None:
        self._history = list(value)

    @property
    def executor(self) -> ToolExecutor:
        return self._scope.get().executor or self._executor

    @executor.setter
    def executor(self, value: ToolExecutor) -> None:
        self._executor = value

    @property
    def current_scope(self) -> Scope:
        return self._scope.get()

    @contextlib.contextmanager
    def scope(self, *, role: str | None = None, parent: int | None = None,
              params: dict[str, Any] | None = None, system_prompt: str | None = None,
              history: list[dict[str, Any]] | None = None,
              executor: ToolExecutor | None = None,
              models: Mapping[str, ChatModel] | None = None, **attrs: Any) -> Iterator[Scope]:
        """Run a sub-agent (a ReAct executor, a debate member) inside this run: steps it emits
        without a parent get `parent`, its "agent" role becomes `role` (which also picks the
        model, ctx.models[role]), and it sees `params`/`system_prompt`/`history`/`executor`/
        `models` instead of the run's. Scopes nest; unset fields are inherited."""
        outer = self._scope.get()
        inner = replace(
            outer,
            role=role if role is not None else outer.role,
            parent=parent if parent is not None else outer.parent,
            params=dict(params) if params is not None else outer.params,
            system_prompt=system_prompt if system_prompt is not None else outer.system_prompt,
            history=list(history) if history is not None else outer.history,
            executor=executor or outer.executor,
            models=models if models is not None else outer.models,
            attrs={**outer.attrs, **attrs},
        )
        token = self._scope.set(inner)
        try:
            yield inner
        finally:
            self._scope.reset(token)

    async def sub_run(self, paradigm: str, task: str, *, role: str, parent: int | None = None,
                      **scope: Any) -> str:
        """Run another paradigm (by key) as a part of this run, inside `scope(role=…)`, and
        return its answer. Its steps, budgets and totals are this run's."""
        with self.scope(role=role, parent=parent, **scope):
            return await self._lookup().get_paradigm(paradigm)().run(self, task)

    async def run_agent(self, spec: AgentSpec, task: str, *, role: str | None = None,
                        parent: int | None = None,
                        history: list[dict[str, Any]] | None = None) -> str:
        """Run the configured agent `spec` as a sub-agent, with its own models when it has them."""
        return await self.sub_run(
            spec.paradigm, task, role=role or spec.name, parent=parent,
            params=self._lookup().validate_params(spec.paradigm, spec.params),
            system_prompt=spec.system_prompt, history=history or [], executor=spec.executor,
            models=spec.models)

    def _lookup(self) -> ParadigmLookup:
        if self.paradigms is None:
            raise RuntimeError("this RunContext has no paradigm lookup for sub-runs "
                               "(pass paradigms=agentlab.paradigms.registry)")
        return self.paradigms

    def model_for(self, role: str) -> ChatModel:
        """The model of `role`: a sub-agent's own models inside its scope, else the run's."""
        models = self._scope.get().models or self.models
        return models.get(role) or models["default"]

    def _scoped_role(self, role: str) -> str:
        scoped = self._scope.get().role
        return scoped if scoped and role == "agent" else role
