"""One executor for every paradigm: validate (jsonschema), coerce, permit, time out, truncate.

Nothing a tool or the model does wrong raises: every problem becomes an error observation the
model can read and recover from, and the full output is always kept beside what the LLM saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import queue
import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from agentlab.tools.coercion import coerce_arguments, describe_violation
from agentlab.tools.decorator import ToolSpec
from agentlab.tools.schema import call_arguments


@dataclass(frozen=True, kw_only=True)
class ToolPolicy:
    """The admin row's settings of one tool, as plain data."""

    enabled: bool = True
    description: str | None = None
    timeout_s: float = 30.0
    max_observation_chars: int = 4000
    needs_approval: bool = False
    allowed_groups: frozenset[str] = frozenset()  # empty = everyone


@dataclass(frozen=True, kw_only=True)
class ToolResult:
    tool: str
    arguments: Any
    ok: bool
    output: str  # the full value, never cut
    observation: str  # what the LLM sees
    error: str | None = None
    error_type: str | None = None
    truncated: bool = False
    duration_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def render(value: Any) -> str:
    """A tool's result as the model reads it: text as it is, anything else as one line of JSON
    (as the agents' few-shot examples show results; indenting cost a small model ~2 tokens a
    line and read unlike the examples)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def truncate(text: str, limit: int) -> tuple[str, bool]:
    """Cut for the LLM with an explicit marker (the caller keeps the full text)."""
    if limit <= 0 or len(text) <= limit:
        return text, False
    return f"{text[:limit]}\n[truncated: {len(text):,} characters, first {limit:,} shown]", True


class _DaemonThreads:
    """Daemon threads kept for the next sync tool. Starting a thread waits for it to run, which
    with other threads busy (the recorder's writer) takes up to a GIL switch interval (5 ms).
    A tool that hangs keeps its thread; a call that finds no idle thread starts another, so a
    hung tool never holds up the others; an idle thread ends after IDLE_S."""

    IDLE_S = 60.0

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, job: Any) -> None:
        with self._lock:
            start = self._idle == 0
            if not start:
                self._idle -= 1  # claimed: that thread takes a job from the queue
        self._jobs.put(job)
        if start:
            threading.Thread(target=self._work, name="agentlab-tool", daemon=True).start()

    def _work(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=self.IDLE_S)
            except queue.Empty:
                with self._lock:
                    if self._idle > 0:  # an unclaimed idle slot: give it up and end
                        self._idle -= 1
                        return
                continue
            job()
            with self._lock:
                self._idle += 1


_THREADS = _DaemonThreads()


def _in_daemon_thread(fn: Any, kwargs: dict[str, Any]) -> asyncio.Future[Any]:
    """Run a sync tool in a daemon thread. A thread cannot be killed, so on a timeout the run
    goes on and the late result is dropped; unlike asyncio.to_thread, a hung tool then never
    holds up the loop's shutdown or the process's exit."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is None:
            future.set_result(value)
        else:
            future.set_exception(error)

    def target() -> None:
        try:
            outcome: tuple[Any, BaseException | None] = (fn(**kwargs), None)
        except Exception as exc:
            outcome = (None, exc)
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
            loop.call_soon_threadsafe(settle, *outcome)

    _THREADS.submit(target)
    return future


class ToolExecutor:
    def __init__(self, tools: Mapping[str, ToolSpec],
                 policies: Mapping[str, ToolPolicy] | None = None, *,
                 user_groups: Collection[str] = (), is_superuser: bool = False) -> None:
        self.tools = dict(tools)
        self.policies = dict(policies or {})
        self.user_groups = frozenset(user_groups)
        self.is_superuser = is_superuser

    def policy(self, name: str) -> ToolPolicy:
        return self.policies.get(name) or ToolPolicy()

    def _permitted(self, name: str) -> bool:
        groups = self.policy(name).allowed_groups
        return self.is_superuser or not groups or bool(groups & self.user_groups)

    @property
    def names(self) -> list[str]:
        """The tools this user may call (enabled and permitted)."""
        return [n for n in self.tools if self.policy(n).enabled and self._permitted(n)]

    def spec(self, name: str) -> ToolSpec | None:
        return self.tools.get(name)

    def openai_tools(self) -> list[dict[str, Any]]:
        return [self.tools[n].openai_schema(self.policy(n).description) for n in self.names]

    def describe(self) -> str:
        """One line per tool, for prompts of text-mode paradigms."""
        lines = []
        for n in self.names:
            spec = self.tools[n]
            props = spec.parameters.get("properties", {})
            required = set(spec.parameters.get("required", []))
            args = ", ".join(
                f"{k}: {v.get('type', 'any')}{'' if k in required else '?'}"
                for k, v in props.items()
            )
            lines.append(f"{n}({args}): {self.policy(n).description or spec.description}")
        return "\n".join(lines)

    def needs_approval(self, name: str) -> bool:
        return name in self.tools and self.policy(name).needs_approval

    async def run(self, name: str, arguments: dict[str, Any] | str | None, *,
                  timeout_s: float | None = None) -> ToolResult:
        started = time.perf_counter()

        def fail(kind: str, message: str, args: Any = arguments) -> ToolResult:
            return ToolResult(tool=name, arguments=args, ok=False, output="",
                              observation=f"Error: {message}", error=message, error_type=kind,
                              duration_ms=(time.perf_counter() - started) * 1000)

        spec = self.tools.get(name)
        if spec is None:
            available = ", ".join(self.names) or "none"
            return fail("unknown_tool", f"unknown tool {name!r}. Available tools: {available}")
        policy = self.policy(name)
        if not policy.enabled:
            return fail("disabled", f"the tool {name!r} is disabled by the administrator")
        if not self._permitted(name):
            return fail("permission", f"permission denied: you may not use the tool {name!r}")
        args, problem = coerce_arguments(spec.parameters, arguments)
        if problem:
            return fail("validation", f"invalid arguments for {name}: {problem}", args)
        if (violation := describe_violation(spec.parameters, args)) is not None:
            return fail("validation", f"invalid arguments for {name}: {violation}", args)
        limit = min(policy.timeout_s, timeout_s) if timeout_s else policy.timeout_s
        kwargs = call_arguments(spec.fn, args)
        try:
            if spec.is_async:
                value = await asyncio.wait_for(spec.fn(**kwargs), limit)
            else:
                value = await asyncio.wait_for(_in_daemon_thread(spec.fn, kwargs), limit)
        except TimeoutError:
            return fail("timeout", f"tool {name} timed out after {limit:g} s", args)
        except Exception as exc:  # a tool's bug is an observation, not the end of the run
            return fail("exception", f"{name} raised {type(exc).__name__}: {exc}", args)
        output = render(value)
        observation, cut = truncate(output, policy.max_observation_chars)
        return ToolResult(tool=name, arguments=args, ok=True, output=output,
                          observation=observation, truncated=cut,
                          duration_ms=(time.perf_counter() - started) * 1000)
