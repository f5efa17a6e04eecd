"""Fixtures: one knell proxy process per module, a fresh name prefix and a
real echo upstream per test; every process is checked gone at the end."""

from __future__ import annotations

from collections.abc import Iterator

import psutil
import pytest

from knell.nemesis.toxiproxy import ServerHandle, ToxiproxyClient, start_local_proxy, unique_prefix
from tests.integration.proxy.servers import EchoServer


@pytest.fixture(scope="module")
def proxy_server() -> Iterator[ServerHandle]:
    handle = start_local_proxy()
    assert handle.pid is not None
    yield handle
    handle.stop()
    assert not psutil.pid_exists(handle.pid) or psutil.Process(handle.pid).status() == "zombie"


@pytest.fixture
def client(proxy_server: ServerHandle) -> Iterator[ToxiproxyClient]:
    tp = ToxiproxyClient(proxy_server.api_url, prefix=unique_prefix("test"), timeout=5.0)
    yield tp
    tp.delete_all()


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.close()
