"""A real Redis for the tests of the cross-process live path (a pytest plugin, loaded by
conftest.py): one redis-server per test session on a free loopback port, its files in a temp
folder, nothing saved; `redis_layer` makes it the channel layer of the test (channels-redis,
as REDIS_URL does in production: its pub/sub layer) and empties it afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agentlab.bench.servers import RedisServer, ServerMissing


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    try:
        server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    except ServerMissing as exc:
        pytest.skip(str(exc))
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
async def redis_layer(redis_url: str, settings: Any) -> Any:
    """This process's channel layer is channels-redis on the session's server (other
    processes the test starts get the same URL as REDIS_URL)."""
    from channels.layers import get_channel_layer

    from agentlab.settings import redis_channel_layer

    settings.CHANNEL_LAYERS = {"default": redis_channel_layer(redis_url)}
    layer = get_channel_layer()
    yield layer
    await layer.flush()  # unsubscribes and closes this loop's connections
