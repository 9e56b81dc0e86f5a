"""A real Redis for the tests of the cross-process live path (a pytest plugin, loaded by
conftest.py): one redis-server per test session on a free loopback port, its files in a temp
folder, nothing saved; `redis_layer` makes it the channel layer of the test (channels-redis,
as REDIS_URL does in production) and empties it afterwards."""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.waiting import wait_until


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not installed (scripts/test installs Debian's)")
    port, folder = free_port(), tmp_path_factory.mktemp("redis")
    log = (folder / "redis.log").open("wb")
    server = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1",
                               "--dir", str(folder), "--save", "", "--appendonly", "no"],
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: server.poll() is not None or _answers(port), timeout=20,
                   message="redis-server answers PING")
        assert server.poll() is None, (folder / "redis.log").read_text()
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.terminate()
        server.wait(10)
        log.close()


@pytest.fixture
async def redis_layer(redis_url: str, settings: Any) -> Any:
    """This process's channel layer is channels-redis on the session's server (other
    processes the test starts get the same URL as REDIS_URL)."""
    from channels.layers import get_channel_layer

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                           "CONFIG": {"hosts": [redis_url]}}}
    layer = get_channel_layer()
    yield layer
    await layer.flush()
    await layer.close_pools()
