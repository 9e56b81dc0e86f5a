"""The MCP test server's processes, for the MCP tests: SERVER, the path of tests/mcp_server.py
(run with a marker argument to tell its processes apart), and running(marker), the live ones."""

from __future__ import annotations

from pathlib import Path

SERVER = str(Path(__file__).with_name("mcp_server.py"))


def running(marker: str) -> list[int]:
    """Pids of live (not zombie) processes whose command line holds `marker`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmd and state != "Z":
            pids.append(int(entry.name))
    return pids
