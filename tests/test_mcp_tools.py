"""Tools from real MCP servers (the official SDK on both sides): the test server of
tests/mcp_server.py over stdio and streamable HTTP, and the published mcp-server-time package
over stdio. Refresh makes Tool rows; the executor validates, calls and times out; a stdio
server's process never outlives its call."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentlab.bench.servers import free_port
from agentlab.tools.executor import ToolExecutor, ToolPolicy
from agentlab.tools.mcp import HTTP, McpServerConfig, list_tools, mcp_tool_spec, tool_name
from tests.mcp_processes import SERVER, running


def stdio_config(marker: str = "", **extra: object) -> McpServerConfig:
    return McpServerConfig(name="lab", command="python",
                           args=(SERVER, *([marker] if marker else [])), **extra)


def spec_of(config: McpServerConfig, tool: str, schema: dict) -> dict:
    name = tool_name(config.name, tool)
    return {name: mcp_tool_spec(config, name=name, tool=tool, description=tool,
                                parameters=schema, side_effects=False)}



@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "MCP_TEST_TOKEN": "s3cret"}
    proc = subprocess.Popen([sys.executable, SERVER, "http", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(10)


def http_config(url: str, **extra: object) -> McpServerConfig:
    return McpServerConfig(name="labhttp", transport=HTTP, url=url, header_name="X-Lab-Token",
                           header_env="LAB_MCP_TOKEN", timeout_s=10, **extra)


def test_listing_over_stdio_gives_schemas_and_read_only_hints():
    tools = {t.name: t for t in asyncio.run(list_tools(stdio_config()))}
    assert {"add", "shout", "sleep", "fail", "whoami"} <= set(tools)
    assert tools["add"].parameters["properties"]["a"]["type"] == "integer"
    assert tools["add"].parameters["required"] == ["a", "b"]
    assert tools["add"].read_only and not tools["shout"].read_only


def test_a_stdio_call_validates_runs_and_leaves_no_process():
    marker = f"marker-{uuid.uuid4()}"
    config = stdio_config(marker, env_names=("MCP_TEST_GREETING", "SECRET_KEY"))
    schema = {"type": "object", "properties": {"a": {"type": "integer"},
                                              "b": {"type": "integer"}}, "required": ["a", "b"]}
    executor = ToolExecutor({**spec_of(config, "add", schema),
                             **spec_of(config, "whoami", {"type": "object"})})
    ok = asyncio.run(executor.run("mcp__lab__add", {"a": 2, "b": 40}))
    assert ok.ok and ok.observation == "2 + 40 = 42"
    wrong = asyncio.run(executor.run("mcp__lab__add", {"a": "two"}))
    assert not wrong.ok and wrong.error_type == "validation"
    assert "invalid arguments for mcp__lab__add" in wrong.observation
    assert running(marker) == []

    os.environ["MCP_TEST_GREETING"] = "bonjour"
    try:
        me = asyncio.run(executor.run("mcp__lab__whoami", {}))
    finally:
        del os.environ["MCP_TEST_GREETING"]
    assert me.ok and me.output.startswith("bonjour pid=")
    pid = int(me.output.rsplit("=", 1)[1])
    assert not Path(f"/proc/{pid}").exists() or running(marker) == []
    assert running(marker) == []


def test_a_hanging_stdio_server_is_a_timeout_error_and_its_process_is_stopped():
    marker = f"marker-{uuid.uuid4()}"
    config = stdio_config(marker)
    schema = {"type": "object", "properties": {"seconds": {"type": "number"}}}
    executor = ToolExecutor(spec_of(config, "sleep", schema),
                            {"mcp__lab__sleep": ToolPolicy(timeout_s=3)})
    started = time.monotonic()
    result = asyncio.run(executor.run("mcp__lab__sleep", {"seconds": 60}))
    assert time.monotonic() - started < 10
    assert result.error_type == "timeout" and "timed out after 3 s" in result.observation
    deadline = time.monotonic() + 5
    while running(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert running(marker) == []


def test_a_tool_error_and_a_missing_command_are_clear_observations():
    executor = ToolExecutor(spec_of(stdio_config(), "fail", {"type": "object"}))
    failed = asyncio.run(executor.run("mcp__lab__fail", {}))
    assert not failed.ok and "the database is on fire" in failed.observation
    gone = McpServerConfig(name="gone", command="/nonexistent/mcp-server")
    missing = asyncio.run(ToolExecutor(spec_of(gone, "x", {"type": "object"})).run(
        "mcp__gone__x", {}))
    assert not missing.ok and missing.error_type == "exception"
    assert "MCP server 'gone'" in missing.observation


def test_streamable_http_with_a_header_from_the_environment(http_server, monkeypatch):
    monkeypatch.setenv("LAB_MCP_TOKEN", "s3cret")
    tools = {t.name for t in asyncio.run(list_tools(http_config(http_server)))}
    assert "add" in tools
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    executor = ToolExecutor(spec_of(http_config(http_server), "shout", schema))
    result = asyncio.run(executor.run("mcp__labhttp__shout", {"text": "hello"}))
    assert result.ok and result.observation == "HELLO"
    monkeypatch.setenv("LAB_MCP_TOKEN", "wrong")
    refused = asyncio.run(executor.run("mcp__labhttp__shout", {"text": "hello"}))
    assert not refused.ok and "Server returned an error response" in refused.observation


def test_an_http_server_that_is_down_is_an_error_within_the_timeout():
    config = http_config(f"http://127.0.0.1:{free_port()}/mcp")
    executor = ToolExecutor(spec_of(config, "add", {"type": "object"}),
                            {"mcp__labhttp__add": ToolPolicy(timeout_s=5)})
    started = time.monotonic()
    result = asyncio.run(executor.run("mcp__labhttp__add", {}))
    assert time.monotonic() - started < 8
    assert not result.ok and result.error_type == "exception"
    assert "MCP server 'labhttp' failed: ConnectError" in result.observation


def test_a_hanging_http_server_is_a_timeout_error(http_server, monkeypatch):
    monkeypatch.setenv("LAB_MCP_TOKEN", "s3cret")
    schema = {"type": "object", "properties": {"seconds": {"type": "number"}}}
    executor = ToolExecutor(spec_of(http_config(http_server), "sleep", schema),
                            {"mcp__labhttp__sleep": ToolPolicy(timeout_s=1)})
    started = time.monotonic()
    result = asyncio.run(executor.run("mcp__labhttp__sleep", {"seconds": 3}))
    assert time.monotonic() - started < 3
    assert result.error_type == "timeout" and "timed out after 1 s" in result.observation


def test_the_published_time_server_over_stdio():
    config = McpServerConfig(name="time", command="python",
                             args=("-m", "mcp_server_time", "--local-timezone", "UTC"))
    tools = {t.name: t for t in asyncio.run(list_tools(config))}
    info = tools["get_current_time"]
    assert info.read_only and info.parameters["required"] == ["timezone"]
    executor = ToolExecutor(spec_of(config, "get_current_time", info.parameters))
    result = asyncio.run(executor.run("mcp__time__get_current_time", {"timezone": "UTC"}))
    assert result.ok and '"timezone": "UTC"' in result.output
    wrong = asyncio.run(executor.run("mcp__time__get_current_time", {}))
    assert wrong.error_type == "validation" and "timezone" in wrong.observation
