"""The targets registry: what ``knell doctor`` says a real system needs here."""

from __future__ import annotations

import pytest

from knell import doctor
from knell.targets import TARGETS, Target, missing


def test_a_target_whose_client_library_is_absent_is_named_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    absent = Target("absent-mq", "absent_mq_driver:connect", "sqlite", ("queue",),
                    ("absent_mq_client_for_knell_tests",), "pip install absent-mq")  # fmt: skip
    present = Target("present", "knell.buses.sqlite:SqliteBus", "sqlite", ("broadcast",), ("json",))
    monkeypatch.setitem(TARGETS, absent.name, absent)
    monkeypatch.setitem(TARGETS, present.name, present)
    assert missing(absent, {"sqlite"}) == ["Python module 'absent_mq_client_for_knell_tests'"]
    assert missing(present, {"sqlite"}) == []
    (cap,) = doctor.diagnose(["targets"])
    found = {f.name: f for f in cap.findings}
    assert (
        not found["absent-mq"].ok
        and "absent_mq_client_for_knell_tests" in found["absent-mq"].detail
    )
    assert found["absent-mq"].hint == "pip install absent-mq"
    assert found["present"].ok and not cap.ok


def test_a_target_on_an_unknown_store_kind_is_named_missing() -> None:
    target = Target("x", "m:f", "no-such-store-kind", ("broadcast",))
    assert missing(target, {"sqlite"}) == ["store kind 'no-such-store-kind'"]


def test_the_matrix_targets_axis_keeps_only_their_scenarios_and_names_an_unknown_one() -> None:
    from pathlib import Path

    from knell.cli.common import UsageProblem
    from knell.cli.matrix import _target_axis
    from knell.scenario import load_scenario

    names = ("quickstart", "redis-streams-stale-ack", "nats-store-crash")
    loaded = [load_scenario(Path("scenarios") / f"{n}.toml") for n in names]
    assert [s.name for s in _target_axis("all", loaded)] == list(names[1:])
    assert [s.name for s in _target_axis("nats-jetstream", loaded)] == ["nats-store-crash"]
    with pytest.raises(UsageProblem, match="unknown \\['kafka'\\]; known: nats-jetstream"):
        _target_axis("kafka", loaded)
    with pytest.raises(UsageProblem, match="no scenario runs redis-streams-fenced"):
        _target_axis("redis-streams-fenced", loaded)


def test_the_pgqueuer_driver_refuses_a_bad_url_before_connecting() -> None:
    pytest.importorskip("pgqueuer")
    from knell.targets.postgres_pgqueuer import connect

    with pytest.raises(ValueError, match="schema='bad-name' is not a valid name"):
        connect("postgresql://127.0.0.1:1/db?schema=bad-name")
    with pytest.raises(ValueError, match="expected a postgresql:// or postgres:// URL"):
        connect("redis://127.0.0.1:1/0")
    assert TARGETS["pgqueuer"].driver == "knell.targets.postgres_pgqueuer:connect"
