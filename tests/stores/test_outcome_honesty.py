"""Outcome honesty on real sockets: a lost reply is unknown, a refused
connection is a failure.

The Postgres and Redis buses reach a real private server through a real
``knell proxy`` link, and the link is broken the two ways a network breaks
a request:

* the reply is cut (a one-way partition of the server-to-client bytes):
  the request reached the server and ran, so the bus must say
  :class:`IndeterminateError` (``info``), never :class:`DefiniteError`
  (``fail``), and once the link heals the post is there;
* the connection is refused (the proxy disabled) before anything is sent:
  the bus may say ``fail``, and nothing was posted.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from knell.buses import DefiniteError, IndeterminateError, open_bus
from knell.nemesis.links import url_address, with_address
from knell.nemesis.toxiproxy import (
    ServerHandle,
    ToxicSpec,
    ToxiproxyClient,
    start_local_proxy,
    unique_prefix,
)
from tests.servers import namespaced

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def proxy() -> Iterator[ToxiproxyClient]:
    handle: ServerHandle = start_local_proxy()
    client = ToxiproxyClient(handle.api_url, prefix=unique_prefix("honesty"), timeout=5.0)
    try:
        yield client
    finally:
        client.delete_all()
        handle.stop()


def _linked(kind: str, store: object, tmp: Path, proxy: ToxiproxyClient) -> tuple[str, str]:
    """(direct URL, URL through a fresh link) for one namespaced bus."""
    url = namespaced(kind, store, tmp, op_timeout="0.5")
    name = f"{kind}-{time.monotonic_ns()}"
    info = proxy.create_proxy(name, url_address(url))
    return name, with_address(url, info.listen)


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_a_lost_reply_is_unknown_and_the_post_landed(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path, proxy: ToxiproxyClient
) -> None:
    store = request.getfixturevalue(f"{kind}_store")
    link, via = _linked(kind, store, tmp_path, proxy)
    bus = open_bus(via)
    try:
        bus.subscribe("reader", "ch", at="start")
        first = bus.post("ch", "before", "p", "k-before")  # the link works
        proxy.apply_toxic(link, ToxicSpec("timeout", "downstream", {"timeout": 0}))
        with pytest.raises(IndeterminateError):
            bus.post("ch", "cut-off", "p", "k-cut")
        proxy.remove_toxic(link, "timeout_downstream")
        seen = [m.body for m in bus.fetch("reader", "ch", after=first.seq, limit=10)]
        assert seen == ["cut-off"], "the request ran: its reply alone was lost"
        again = bus.post("ch", "cut-off", "p", "k-cut")  # the retry finds the original
        assert again.seq == first.seq + 1
    finally:
        bus.close()


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_a_refused_connection_is_a_failure_and_nothing_landed(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path, proxy: ToxiproxyClient
) -> None:
    store = request.getfixturevalue(f"{kind}_store")
    link, via = _linked(kind, store, tmp_path, proxy)
    bus = open_bus(via)
    try:
        head = bus.head("ch")
        proxy.disable(link)  # open connections closed, new ones refused
        with pytest.raises(DefiniteError):
            bus.post("ch", "refused", "p", "k-refused")
        proxy.enable(link)
        assert bus.head("ch") == head, "a refused post must not have landed"
        assert bus.post("ch", "after", "p", "k-after").seq == head + 1
    finally:
        bus.close()
