"""The adapter: per-client address and prefix, timeouts, the calls the
package lacks, bad input, recreate, prove and heal, on a real server."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from knell.nemesis.probe import LinkDown, wait_carries_traffic
from knell.nemesis.toxiproxy import (
    AdminTimeout,
    AlreadyExists,
    ApiRefused,
    BadRequest,
    NotFound,
    ProxySpec,
    ServerHandle,
    ToxicSpec,
    ToxiproxyClient,
    Unreachable,
    start_local_proxy,
    unique_prefix,
)
from tests.integration.proxy.servers import EchoServer, connect, roundtrip

pytestmark = pytest.mark.integration


def test_prefixes_keep_parallel_runs_apart(proxy_server: ServerHandle, echo: EchoServer) -> None:
    one = ToxiproxyClient(proxy_server.api_url, prefix=unique_prefix())
    two = ToxiproxyClient(proxy_server.api_url, prefix=unique_prefix())
    assert one.prefix != two.prefix
    try:
        one.create_proxy("store", echo.address)
        two.create_proxy("store", echo.address)  # the same short name, no collision
        one.apply_toxic("store", ToxicSpec("latency", attributes={"latency": 10}))
        assert list(one.proxies()) == ["store"]
        assert [t.name for t in one.proxy("store").toxics] == ["latency_downstream"]
        assert two.proxy("store").toxics == ()
        two.delete_all()
        assert list(one.proxies()) == ["store"]
    finally:
        one.delete_all()
        two.delete_all()


def test_each_client_talks_to_its_own_server_from_any_thread(echo: EchoServer) -> None:
    """The package's address is class-level; the adapter's is per call."""
    with start_local_proxy() as first, start_local_proxy() as second:
        clients = [ToxiproxyClient(first.api_url), ToxiproxyClient(second.api_url)]
        errors: list[BaseException] = []

        def work(index: int) -> None:
            try:
                for round_ in range(20):
                    name = f"t{index}-{round_}"
                    clients[index].create_proxy(name, echo.address)
                    assert name in clients[index].proxies()
                    assert name not in clients[1 - index].proxies()
                    clients[index].delete_proxy(name)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,)) for i in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors, errors


@pytest.fixture
def silent_api() -> Iterator[str]:
    """An API address that accepts connections and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


def test_every_admin_call_has_a_timeout(silent_api: str) -> None:
    client = ToxiproxyClient(silent_api, timeout=0.3)
    for call in (
        lambda: client.version(),
        lambda: client.proxies(),
        lambda: client.create_proxy("p", "127.0.0.1:1"),
        lambda: client.apply_toxic("p", ToxicSpec("latency")),
        lambda: client.remove_toxic("p", "latency_downstream"),
        lambda: client.update_toxic("p", "latency_downstream", toxicity=0.5),
        lambda: client.populate([ProxySpec("p", "127.0.0.1:1")]),
        lambda: client.disable("p"),
    ):
        start = time.perf_counter()
        with pytest.raises(AdminTimeout):
            call()
        assert time.perf_counter() - start < 1.5


def test_unreachable_api_is_its_own_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(Unreachable):
        ToxiproxyClient(f"http://127.0.0.1:{port}", timeout=1.0).version()


def test_update_proxy_and_toxic(client: ToxiproxyClient, echo: EchoServer) -> None:
    other = EchoServer()
    try:
        info = client.create_proxy("link", echo.address)
        moved = client.update_proxy("link", upstream=other.address)
        assert moved.upstream == other.address and moved.listen == info.listen
        with connect(info.listen) as sock:
            assert roundtrip(sock) < 0.1
        assert other.accepted == 1
        client.apply_toxic("link", ToxicSpec("latency", attributes={"latency": 10, "jitter": 2}))
        updated = client.update_toxic("link", "latency_downstream", attributes={"latency": 150})
        assert updated.attributes == {"latency": 150, "jitter": 2}
        with connect(info.listen) as sock:
            assert roundtrip(sock) >= 0.148
        off = client.update_proxy("link", enabled=False)
        assert not off.enabled
    finally:
        other.close()


def test_populate_keeps_an_unchanged_proxy_and_its_toxics(
    client: ToxiproxyClient, echo: EchoServer
) -> None:
    first = client.populate([ProxySpec("a", echo.address), ProxySpec("b", echo.address)])
    assert [p.name for p in first] == ["a", "b"]
    listen_a = first[0].listen
    client.apply_toxic("a", ToxicSpec("latency", attributes={"latency": 5}))
    again = client.populate([ProxySpec("a", echo.address, listen=listen_a)])
    assert again[0].listen == listen_a
    assert [t.name for t in again[0].toxics] == ["latency_downstream"]


def test_bad_input_is_refused_and_every_other_proxy_keeps_serving(
    client: ToxiproxyClient, echo: EchoServer
) -> None:
    good = client.create_proxy("good", echo.address).listen
    client.create_proxy("victim", echo.address)
    with pytest.raises(BadRequest, match="invalid toxic type"):
        client.apply_toxic("victim", ToxicSpec("walrus"))
    toxics_url = f"{client.api_url}/proxies/{client.full('victim')}/toxics"
    negative = httpx.post(toxics_url, json={"type": "latency", "attributes": {"latency": -5}})
    assert negative.status_code == 400
    assert "latency of a latency toxic must be >= 0" in negative.json()["error"]
    garbage = httpx.post(toxics_url, content=b"{nope")
    assert garbage.status_code == 400
    assert garbage.json()["error"].startswith("bad request body: ")
    client.apply_toxic("victim", ToxicSpec("latency", attributes={"latency": 1}))
    with pytest.raises(BadRequest, match="must be >= 0"):
        client.update_toxic("victim", "latency_downstream", attributes={"latency": -5})
    with pytest.raises(ApiRefused, match="address already in use") as in_use:
        client.create_proxy("clash", echo.address, listen=good)
    assert in_use.value.status == 500
    with pytest.raises(NotFound, match="proxy not found"):
        client.apply_toxic("ghost", ToxicSpec("latency"))
    with pytest.raises(AlreadyExists):
        client.create_proxy("good", echo.address)
    with pytest.raises(ValueError, match="must be an integer >= 0"):
        ToxicSpec("latency", attributes={"latency": -1})
    with connect(good) as sock:
        assert roundtrip(sock) < 0.1


def test_recreate_keeps_the_listen_address(client: ToxiproxyClient, echo: EchoServer) -> None:
    listen = client.create_proxy("link", echo.address).listen
    client.apply_toxic("link", ToxicSpec("timeout", attributes={"timeout": 0}))
    again = client.recreate("link")
    assert again.listen == listen and again.toxics == ()
    with connect(listen) as sock:
        assert roundtrip(sock) < 0.1


def test_prove_and_heal_a_partition(client: ToxiproxyClient, echo: EchoServer) -> None:
    client.create_proxy("link", echo.address)
    partition = [ToxicSpec("timeout", s, {"timeout": 0}) for s in ("upstream", "downstream")]
    healthy = client.prove("link", partition, "echo", hold_ms=200)
    assert healthy.status == "disproven"  # nothing applied yet: the probe got its reply
    for toxic in partition:
        client.apply_toxic("link", toxic)
    proof = client.prove("link", partition, "echo", hold_ms=200)
    assert proof.status == "proven", proof
    assert proof.evidence is not None and proof.evidence.outcome == "held"
    report = client.heal("link", [t.local_name for t in partition], "echo")
    assert report.recreated is None
    assert report.traffic is not None and report.traffic.outcome == "reply"
    assert client.proxy("link").toxics == ()


def test_prove_refuse_and_heal_by_enabling(client: ToxiproxyClient, echo: EchoServer) -> None:
    client.create_proxy("link", echo.address)
    client.disable("link")
    assert client.prove("link", disabled=True).status == "proven"
    report = client.heal("link", enable=True)
    assert report.traffic is not None and client.proxy("link").enabled


def test_wait_for_traffic_gives_up_with_evidence(client: ToxiproxyClient, echo: EchoServer) -> None:
    client.create_proxy("link", echo.address)
    client.apply_toxic("link", ToxicSpec("timeout", attributes={"timeout": 0}))
    with pytest.raises(LinkDown) as down:
        wait_carries_traffic(client.listen_of("link"), "echo", timeout=0.5)
    assert down.value.evidence is not None and down.value.evidence.outcome == "held"
