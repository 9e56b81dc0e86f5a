"""Tools from MCP servers (the official `mcp` SDK): list a server's tools, and a ToolSpec whose
call opens a session, calls the tool and closes the session again.

One session per call: a stdio server's process lives inside `stdio_client`'s context, so it is
started and stopped by the call, also when the executor's timeout cancels it (the SDK
terminates the process tree on the way out). Nothing stays running between calls, and a server
that is down or hangs is one call's error, never the run's.

Pure: the configuration arrives as plain data (agentlab.tool_rows makes it from the admin
rows); only environment variable NAMES are configured, their values are read here at call time.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from agentlab.llm.keys import SERVER_PREFIXES, SERVER_VARIABLES, key_variable_problem
from agentlab.tools.decorator import ToolSpec

STDIO, HTTP = "stdio", "http"
CATEGORY = "mcp"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
NAME_LIMIT = 64  # OpenAI function names: ^[a-zA-Z0-9_-]{1,64}$


class McpError(RuntimeError):
    """A server that cannot be reached, or a tool that reported an error."""


@dataclass(frozen=True, kw_only=True)
class McpServerConfig:
    name: str
    transport: str = STDIO
    command: str = ""
    args: tuple[str, ...] = ()
    env_names: tuple[str, ...] = ()
    url: str = ""
    header_name: str = ""
    header_env: str = ""
    timeout_s: float = 30.0

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> McpServerConfig:
        return cls(**{**data, "args": tuple(data.get("args", ())),
                      "env_names": tuple(data.get("env_names", ()))})


@dataclass(frozen=True, kw_only=True)
class McpToolInfo:
    name: str
    description: str
    parameters: dict[str, Any]
    read_only: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def env_name_problem(name: str) -> str | None:
    """Why the server's variable `name` may not be handed to an MCP server, or None."""
    if not re.fullmatch(r"[A-Z_][A-Z0-9_]*", name):
        return f"{name!r} is not the NAME of an environment variable (upper case, digits, _)"
    if name in SERVER_VARIABLES or name.startswith(SERVER_PREFIXES):
        return f"{name} is a variable the server itself runs on; it is never passed on"
    return None


def tool_name(server: str, tool: str) -> str:
    """The Tool row's name of a server's tool: `mcp__<server>__<tool>`, safe for every API."""
    return _UNSAFE.sub("_", f"mcp__{server}__{tool}")[:NAME_LIMIT]


def _env(config: McpServerConfig) -> dict[str, str]:
    from mcp.client.stdio import get_default_environment

    env = get_default_environment()  # PATH, HOME, …: what a program needs to start
    for name in config.env_names:
        if env_name_problem(name) is None and name in os.environ:
            env[name] = os.environ[name]
    return env


@asynccontextmanager
async def session(config: McpServerConfig) -> AsyncIterator[Any]:
    """An initialized ClientSession; the transport (and a stdio process) ends with it."""
    from mcp import ClientSession

    async with _transport(config) as streams, ClientSession(
            *streams, read_timeout_seconds=config.timeout_s) as client:
        await client.initialize()
        yield client


@asynccontextmanager
async def _transport(config: McpServerConfig) -> AsyncIterator[Any]:
    if config.transport == HTTP:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        headers = {}
        if config.header_name:
            # Checked again here: a snapshot may come from elsewhere, the list may have changed.
            if problem := key_variable_problem(config.header_env):
                raise McpError(f"the header's variable may not be used: {problem}")
            headers[config.header_name] = os.environ.get(config.header_env, "")
        async with httpx2.AsyncClient(headers=headers,
                                      timeout=httpx2.Timeout(config.timeout_s)) as http, \
                streamable_http_client(config.url, http_client=http) as streams:
            yield streams
        return
    from mcp.client.stdio import StdioServerParameters, stdio_client

    command = sys.executable if config.command in ("python", "python3") else config.command
    params = StdioServerParameters(command=command, args=list(config.args), env=_env(config))
    with open(os.devnull, "w") as quiet:  # the server's log is not the run's
        async with stdio_client(params, errlog=quiet) as streams:
            yield streams


async def list_tools(config: McpServerConfig) -> list[McpToolInfo]:
    """Every tool the server lists (all pages), with its input schema and read-only hint;
    TimeoutError after the server's timeout (an admin page never hangs on a stuck server)."""
    found: list[McpToolInfo] = []
    async with asyncio.timeout(config.timeout_s), session(config) as client:
        cursor = None
        while True:
            from mcp.types import PaginatedRequestParams

            page = await client.list_tools(
                params=PaginatedRequestParams(cursor=cursor) if cursor else None)
            for t in page.tools:
                hints = t.annotations
                found.append(McpToolInfo(
                    name=t.name, description=t.description or t.name,
                    parameters=dict(t.input_schema or {"type": "object"}),
                    read_only=bool(hints and hints.read_only_hint)))
            cursor = page.next_cursor
            if not cursor:
                return found


def _text(result: Any) -> str:
    parts = [getattr(c, "text", None) or f"[{getattr(c, 'type', 'content')}]"
             for c in result.content]
    return "\n".join(parts)


async def call_tool(config: McpServerConfig, tool: str, arguments: dict[str, Any]) -> Any:
    """Call one tool in a session of its own; a tool's error result raises McpError."""
    async with session(config) as client:
        result = await client.call_tool(tool, arguments)
    if result.is_error:
        raise McpError(_text(result) or "the MCP server reported an error")
    if result.content:
        return _text(result)
    return result.structured_content or ""


def mcp_tool_spec(config: McpServerConfig, *, name: str, tool: str, description: str,
                  parameters: dict[str, Any], side_effects: bool) -> ToolSpec:
    """A ToolSpec the executor validates (jsonschema), times out and records like a built-in."""

    async def call(**arguments: Any) -> Any:
        try:
            return await call_tool(config, tool, arguments)
        except McpError:
            raise
        except OSError as exc:
            raise McpError(f"MCP server {config.name!r} could not be started or reached: "
                           f"{exc}") from None
        except Exception as exc:  # an ExceptionGroup from the transport's task group, …
            raise McpError(f"MCP server {config.name!r} failed: {_reason(exc)}") from None

    return ToolSpec(name=name, description=description, parameters=parameters, fn=call,
                    is_async=True, side_effects=side_effects, category=CATEGORY)


def describe_failure(exc: BaseException) -> str:
    """One line for a failed connection (an ExceptionGroup names its first cause)."""
    return _reason(exc)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "no answer within the server's timeout"
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


def mcp_spec(name: str, entry: dict[str, Any]) -> ToolSpec:
    """The ToolSpec of a snapshot's MCP entry (agentlab.tool_rows.mcp_entry)."""
    return mcp_tool_spec(McpServerConfig.from_dict(entry["server"]), name=name,
                         tool=entry["tool"], description=entry["description"],
                         parameters=entry["parameters"] or {"type": "object"},
                         side_effects=bool(entry.get("side_effects", True)))
