"""Toxic semantics measured on real sockets: an echo server, knell's proxy
process in between, and the client's own clock."""

from __future__ import annotations

import contextlib
import socket
import time

import pytest

from knell.nemesis.toxiproxy import ToxicSpec, ToxiproxyClient
from tests.integration.proxy.servers import EchoServer, connect, recv_exactly, roundtrip

pytestmark = pytest.mark.integration


def _proxy(client: ToxiproxyClient, echo: EchoServer, name: str = "link") -> str:
    return client.create_proxy(name, echo.address).listen


def test_no_toxic_passes_bytes_both_ways(client: ToxiproxyClient, echo: EchoServer) -> None:
    listen = _proxy(client, echo)
    with connect(listen) as sock:
        big = bytes(range(256)) * 4096  # 1 MiB
        sock.sendall(big)
        assert recv_exactly(sock, len(big)) == big
        assert roundtrip(sock) < 0.1


def test_latency_adds_at_least_its_delay(client: ToxiproxyClient, echo: EchoServer) -> None:
    listen = _proxy(client, echo)
    client.apply_toxic("link", ToxicSpec("latency", attributes={"latency": 200}))
    with connect(listen) as sock:
        took = roundtrip(sock)
    assert 0.200 <= took < 0.400, took


def test_latency_upstream_and_downstream_add_up(client: ToxiproxyClient, echo: EchoServer) -> None:
    listen = _proxy(client, echo)
    client.apply_toxic("link", ToxicSpec("latency", "upstream", {"latency": 100}))
    client.apply_toxic("link", ToxicSpec("latency", "downstream", {"latency": 100}))
    with connect(listen) as sock:
        took = roundtrip(sock)
    assert 0.200 <= took < 0.400, took


def test_partition_holds_until_heal_then_closes_the_held_connection(
    client: ToxiproxyClient, echo: EchoServer
) -> None:
    """Toxiproxy's timeout 0: bytes are dropped while it stands and removing
    it closes the connections it held; new connections work again."""
    listen = _proxy(client, echo)
    with connect(listen) as healthy:
        assert roundtrip(healthy) < 0.1
        for stream in ("upstream", "downstream"):
            client.apply_toxic("link", ToxicSpec("timeout", stream, {"timeout": 0}))
        healthy.sendall(b"during")
        healthy.settimeout(0.5)
        with pytest.raises(TimeoutError):
            healthy.recv(10)  # hangs: the request is held
        start = time.perf_counter()
        for stream in ("upstream", "downstream"):
            client.remove_toxic("link", f"timeout_{stream}")
        assert time.perf_counter() - start < 1.0  # no admin call hangs under traffic
        healthy.settimeout(2.0)
        with contextlib.suppress(ConnectionResetError):
            assert healthy.recv(10) == b""  # the held connection is closed at heal
    with connect(listen) as fresh:
        assert roundtrip(fresh) < 0.1


def test_timeout_closes_after_its_delay(client: ToxiproxyClient, echo: EchoServer) -> None:
    listen = _proxy(client, echo)
    client.apply_toxic("link", ToxicSpec("timeout", attributes={"timeout": 300}))
    with connect(listen) as sock:
        start = time.perf_counter()
        sock.sendall(b"x")
        assert sock.recv(10) == b""
        assert 0.3 <= time.perf_counter() - start < 1.0


def test_reset_peer_resets_the_client(client: ToxiproxyClient, echo: EchoServer) -> None:
    listen = _proxy(client, echo)
    client.apply_toxic("link", ToxicSpec("reset_peer", "upstream", {"timeout": 100}))
    with connect(listen) as sock:
        start = time.perf_counter()
        sock.sendall(b"hello")
        with pytest.raises(ConnectionResetError):
            sock.recv(10)
        assert time.perf_counter() - start >= 0.1


def test_reset_peer_also_resets_connections_opened_before(
    client: ToxiproxyClient, echo: EchoServer
) -> None:
    listen = _proxy(client, echo)
    with connect(listen) as sock:
        assert roundtrip(sock) < 0.1
        client.apply_toxic("link", ToxicSpec("reset_peer", "upstream", {"timeout": 0}))
        sock.sendall(b"hello")
        with pytest.raises(ConnectionResetError):
            sock.recv(10)


def test_bandwidth_caps_a_bulk_transfer_within_20_percent(
    client: ToxiproxyClient, echo: EchoServer
) -> None:
    listen = _proxy(client, echo)
    rate = 500  # KB/s
    client.apply_toxic("link", ToxicSpec("bandwidth", attributes={"rate": rate}))
    size = 500_000
    with connect(listen) as sock:
        start = time.perf_counter()
        sock.sendall(b"b" * size)
        assert len(recv_exactly(sock, size)) == size
        took = time.perf_counter() - start
    measured = size / took / 1000
    assert abs(measured - rate) <= 0.2 * rate, measured


def test_limit_data_closes_after_exactly_n_bytes(client: ToxiproxyClient, echo: EchoServer) -> None:
    listen = _proxy(client, echo)
    client.apply_toxic("link", ToxicSpec("limit_data", attributes={"bytes": 1000}))
    with connect(listen) as sock:
        sock.sendall(b"a" * 600)
        first = recv_exactly(sock, 600)
        sock.sendall(b"b" * 600)
        rest = recv_exactly(sock, 600)
    assert len(first) + len(rest) == 1000
    assert rest == b"b" * 400


def test_slicer_delivers_in_slices(client: ToxiproxyClient, echo: EchoServer) -> None:
    listen = _proxy(client, echo)
    attrs = {"average_size": 100, "size_variation": 20, "delay": 20_000}
    client.apply_toxic("link", ToxicSpec("slicer", attributes=attrs))
    with connect(listen) as sock:
        start = time.perf_counter()
        sock.sendall(b"s" * 1000)
        reads = 0
        got = 0
        while got < 1000:
            got += len(sock.recv(4096))
            reads += 1
        took = time.perf_counter() - start
    assert reads >= 5, reads
    assert took >= 0.1, took  # >= 7 gaps of 20 ms between about 10 slices


def test_slow_close_delays_the_close(client: ToxiproxyClient, echo: EchoServer) -> None:
    listen = _proxy(client, echo)
    client.apply_toxic("link", ToxicSpec("slow_close", attributes={"delay": 300}))
    with connect(listen) as sock:
        assert roundtrip(sock) < 0.1
        start = time.perf_counter()
        sock.shutdown(socket.SHUT_WR)
        assert sock.recv(10) == b""
        took = time.perf_counter() - start
    assert 0.3 <= took < 1.0, took


def test_disabled_proxy_refuses_and_closes_open_connections(
    client: ToxiproxyClient, echo: EchoServer
) -> None:
    listen = _proxy(client, echo)
    with connect(listen) as sock:
        assert roundtrip(sock) < 0.1
        client.disable("link")
        with contextlib.suppress(ConnectionResetError):
            assert sock.recv(10) == b""
    with pytest.raises(ConnectionRefusedError):
        connect(listen)
    client.enable("link")
    with connect(listen) as sock:  # the same address again
        assert roundtrip(sock) < 0.1


@pytest.mark.parametrize(("toxicity", "slow"), [(0.0, False), (1.0, True)])
def test_toxicity_zero_never_applies_one_always(
    client: ToxiproxyClient, echo: EchoServer, toxicity: float, slow: bool
) -> None:
    listen = _proxy(client, echo)
    # 300 ms: far above what a loaded CI machine adds to a loopback round trip
    spec = ToxicSpec("latency", attributes={"latency": 300}, toxicity=toxicity)
    client.apply_toxic("link", spec)
    for _ in range(5):
        with connect(listen) as sock:
            took = roundtrip(sock)
        assert (took >= 0.300) is slow, took


def test_toxic_added_and_removed_under_traffic_keeps_order(
    client: ToxiproxyClient, echo: EchoServer
) -> None:
    """Switching between the fast path and the toxic pipeline never
    reorders or drops a byte."""
    listen = _proxy(client, echo)
    with connect(listen) as sock:
        sent = bytearray()
        received = bytearray()
        for i in range(60):
            if i % 20 == 5:
                client.apply_toxic("link", ToxicSpec("latency", attributes={"latency": 5}))
            if i % 20 == 15:
                client.remove_toxic("link", "latency_downstream")
            block = bytes([i]) * 5000
            sock.sendall(block)
            sent += block
            received += recv_exactly(sock, len(block))
    assert received == sent


def test_upstream_down_closes_the_client(client: ToxiproxyClient) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{free.getsockname()[1]}"
    listen = client.create_proxy("dead", dead).listen
    with connect(listen) as sock:
        sock.settimeout(2.0)
        with contextlib.suppress(ConnectionResetError):
            assert sock.recv(10) == b""


def test_the_final_sweep_heals_every_link_with_one_listing(
    client: ToxiproxyClient, echo: EchoServer
) -> None:
    """After a run, whatever toxic or disabled proxy a fault left is undone;
    the sweep lists the proxies once, not two calls per link (a replicated
    store's run has dozens of links, and every link kind sweeps)."""
    from knell.nemesis.kind import NemesisContext
    from knell.nemesis.links import LinkSet
    from knell.nemesis.partition import Partition

    links = LinkSet(client, None)
    for name in ("a", "b", "c"):
        links.add(name, "store", echo.address, ["p"], "echo")
    client.apply_toxic("a", ToxicSpec("timeout", "upstream", {"timeout": 0}))
    client.disable("b")
    recorded: list[tuple[str, str]] = []
    calls: list[str] = []
    raw = client._raw

    def counting(method: str, path: str, *args: object, **kwargs: object) -> object:
        calls.append(f"{method} {path}")
        return raw(method, path, *args, **kwargs)  # type: ignore[arg-type]

    client._raw = counting  # type: ignore[method-assign]
    ctx = NemesisContext(
        scenario=None,  # type: ignore[arg-type]
        supervisor=None,  # type: ignore[arg-type]
        record=lambda f, target, **_: recorded.append((f, target)),
        links={"links": links},
    )
    Partition().heal_all(ctx)
    assert sorted(recorded) == [("partition-end", "a"), ("partition-end", "b")]
    assert calls[0] == "GET /proxies"
    assert not any(c.startswith("GET /proxies/") and c.endswith("c") for c in calls)
    listed = client.proxies()
    assert all(p.enabled and not p.toxics for p in listed.values())
    with connect(links.links["a"].listen) as sock:
        assert roundtrip(sock) < 0.5
