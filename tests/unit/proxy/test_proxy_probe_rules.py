"""Which expectation proves which fault, and what a probe cannot prove."""

from __future__ import annotations

import pytest

from knell.nemesis.probe import (
    Closed,
    Delayed,
    Evidence,
    Held,
    LimitedTo,
    Proof,
    Refused,
    Reset,
    Sliced,
    SlowClosed,
    Throttled,
    expectation_for,
)
from knell.nemesis.toxiproxy import ToxicSpec, ToxiproxyClient, unique_prefix


def _t(type_: str, stream: str = "downstream", **attrs: int) -> ToxicSpec:
    return ToxicSpec(type_, stream, attrs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("toxics", "exchange", "expected"),
    [
        ([], "postgres", None),
        ([_t("timeout", timeout=0)], "postgres", Held(300.0)),
        ([_t("timeout", timeout=250)], "redis", Closed(within_ms=1250.0)),
        ([_t("reset_peer", timeout=10)], "postgres", Reset(within_ms=1010.0)),
        ([_t("latency", latency=200, jitter=50)], "redis", Delayed(min_ms=150)),
        ([_t("limit_data", "upstream", bytes=4)], "postgres", Closed(2000.0, max_bytes=4)),
        ([_t("limit_data", bytes=10)], "echo", LimitedTo(2000.0, 10, 4106)),
        ([_t("bandwidth", rate=100)], "echo", Throttled(100, 30000)),
        ([_t("slicer", average_size=10, delay=5000)], "echo", Sliced(64)),
        ([_t("slow_close", delay=100)], "redis", SlowClosed(100)),
        # the most visible toxic decides
        ([_t("latency", latency=5), _t("timeout", timeout=0)], "echo", Held(300.0)),
    ],
)
def test_each_fault_has_its_proof(toxics: list[ToxicSpec], exchange: str, expected: object) -> None:
    got = expectation_for(toxics, exchange)
    if expected is None:
        assert isinstance(got, str)
    else:
        assert got == expected


def test_refuse_is_a_refused_connect() -> None:
    assert expectation_for([], "connect", disabled=True) == Refused()


@pytest.mark.parametrize(
    ("toxics", "exchange", "reason"),
    [
        ([_t("bandwidth", rate=100)], "postgres", "echo exchange"),
        ([_t("slicer", average_size=10, delay=5000)], "redis", "echo exchange"),
        ([_t("slicer", average_size=10, delay=0)], "echo", "coalesce"),
        ([_t("latency", latency=100)], "connect", "sends nothing"),
        ([_t("limit_data", bytes=1000)], "postgres", "above what"),
    ],
)
def test_what_an_exchange_cannot_see_is_said(
    toxics: list[ToxicSpec], exchange: str, reason: str
) -> None:
    got = expectation_for(toxics, exchange)
    assert isinstance(got, str) and reason in got


def test_proofs_and_evidence_are_plain_json() -> None:
    evidence = Evidence("held", "127.0.0.1:1", "postgres", connect_ms=0.1234, waited_ms=300.0)
    proof = Proof("proven", "no reply", evidence=evidence)
    data = proof.to_json()
    assert data["status"] == "proven" and data["evidence"]["connect_ms"] == 0.123
    assert Held(300).holds(evidence)
    assert not Held(301).holds(evidence)


def test_specs_and_clients_validate_their_arguments() -> None:
    with pytest.raises(ValueError, match="stream"):
        ToxicSpec("latency", "sideways")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="toxicity"):
        ToxicSpec("latency", toxicity=2.0)
    with pytest.raises(ValueError, match="http://"):
        ToxiproxyClient("127.0.0.1:8474")
    with pytest.raises(ValueError, match="timeout"):
        ToxiproxyClient("http://127.0.0.1:8474", timeout=0)
    assert unique_prefix() != unique_prefix()
    client = ToxiproxyClient("http://127.0.0.1:8474", prefix="run-1-")
    assert client.full("store") == "run-1-store"
