"""Every fault kind is proven by a probe through the proxy, and a probe
never proves what it cannot see."""

from __future__ import annotations

import pytest

from knell.nemesis.probe import EXCHANGES, Exchange, probe, prove
from knell.nemesis.toxiproxy import ToxicSpec, ToxiproxyClient
from tests.integration.proxy.servers import EchoServer

pytestmark = pytest.mark.integration

FAULTS: dict[str, list[ToxicSpec]] = {
    "partition": [ToxicSpec("timeout", s, {"timeout": 0}) for s in ("upstream", "downstream")],
    "latency": [ToxicSpec("latency", attributes={"latency": 150, "jitter": 20})],
    "bandwidth": [ToxicSpec("bandwidth", attributes={"rate": 100})],
    "reset-peer": [ToxicSpec("reset_peer", "upstream", {"timeout": 50})],
    "slow-close": [ToxicSpec("slow_close", attributes={"delay": 200})],
    "slicer": [
        ToxicSpec("slicer", attributes={"average_size": 64, "size_variation": 8, "delay": 2000})
    ],
    "limit-data": [ToxicSpec("limit_data", attributes={"bytes": 100})],
    "timeout": [ToxicSpec("timeout", attributes={"timeout": 200})],
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_each_fault_is_proven_and_a_healthy_link_disproves_it(
    client: ToxiproxyClient, echo: EchoServer, fault: str
) -> None:
    toxics = FAULTS[fault]
    client.create_proxy("link", echo.address)
    before = client.prove("link", toxics, "echo", hold_ms=200)
    assert before.status == "disproven", before
    for toxic in toxics:
        client.apply_toxic("link", toxic)
    proof = client.prove("link", toxics, "echo", hold_ms=200)
    assert proof.status == "proven", proof.to_json()
    assert proof.to_json()["evidence"]["outcome"]


def test_refuse_is_proven(client: ToxiproxyClient, echo: EchoServer) -> None:
    client.create_proxy("link", echo.address)
    assert client.prove("link", disabled=True).status == "disproven"
    client.disable("link")
    proof = client.prove("link", disabled=True)
    assert proof.status == "proven" and proof.evidence is not None
    assert proof.evidence.outcome == "refused"


def test_toxicity_below_one_is_unproven_even_when_seen(
    client: ToxiproxyClient, echo: EchoServer
) -> None:
    toxic = ToxicSpec("latency", attributes={"latency": 100}, toxicity=0.5)
    client.create_proxy("link", echo.address)
    client.apply_toxic("link", toxic)
    proof = client.prove("link", [toxic], "echo")
    assert proof.status == "unproven"
    assert "toxicity below 1" in proof.reason
    assert proof.evidence is not None  # measured and recorded all the same


def test_a_database_exchange_cannot_prove_bandwidth(
    client: ToxiproxyClient, echo: EchoServer
) -> None:
    client.create_proxy("link", echo.address)
    proof = client.prove("link", FAULTS["bandwidth"], "postgres")
    assert proof.status == "unproven" and "echo exchange" in proof.reason
    assert proof.evidence is None


def test_a_request_reply_exchange_proves_latency(client: ToxiproxyClient, echo: EchoServer) -> None:
    """A store-like exchange (fixed request, recognised reply): the echo
    server answers it like a store would answer PING."""
    ping = Exchange("ping", b"PING\r\n", (b"PING\r\n",))
    client.create_proxy("link", echo.address)
    client.apply_toxic("link", FAULTS["latency"][0])
    proof = client.prove("link", FAULTS["latency"], ping)
    assert proof.status == "proven", proof.to_json()
    assert proof.evidence is not None and proof.evidence.recognised is True


def test_connect_only_probe_sees_refusal_only(client: ToxiproxyClient, echo: EchoServer) -> None:
    listen = client.create_proxy("link", echo.address).listen
    assert probe(listen, EXCHANGES["connect"]).outcome == "reply"
    assert prove(listen, FAULTS["latency"], "connect").status == "unproven"
    client.disable("link")
    assert probe(listen, "connect").outcome == "refused"
