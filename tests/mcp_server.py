"""An MCP server written for the tests with the SDK's server API (mcp 2: MCPServer, the
former FastMCP). `python tests/mcp_server.py` serves stdio; `... http PORT` streamable HTTP on
127.0.0.1:PORT/mcp (a token header is required when MCP_TEST_TOKEN is set)."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("lab-test")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def add(a: int, b: int) -> str:
    """Add two integers."""
    return f"{a} + {b} = {a + b}"


@server.tool()
def shout(text: str) -> str:
    """Write a text in capitals (marked as having side effects)."""
    return text.upper()


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def whoami() -> str:
    """The value of MCP_TEST_GREETING in the server's environment, and its process id."""
    return f"{os.environ.get('MCP_TEST_GREETING', 'unset')} pid={os.getpid()}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def environment() -> str:
    """The NAMES of the variables in the server's environment (what its parent handed on)."""
    return " ".join(sorted(os.environ))


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def sleep(seconds: float) -> str:
    """Hang for a while (blocks the server, as a stuck server would)."""
    time.sleep(seconds)
    return "awake"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def fail() -> str:
    """Always fails with a message for the client (other exceptions' texts stay hidden)."""
    raise ToolError("the database is on fire")


def guarded(app: Any, token: str) -> Any:
    """The app, answering 401 to a request without `X-Lab-Token: <token>`."""

    async def asgi(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"x-lab-token") \
                != token.encode():
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"no token"})
            return
        await app(scope, receive, send)

    return asgi


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        import uvicorn

        app = server.streamable_http_app()
        if token := os.environ.get("MCP_TEST_TOKEN"):
            app = guarded(app, token)
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        server.run()  # stdio; further arguments (a marker for the process table) are ignored
