"""The ``replica-lag`` fault kind in process: its ``[[nemesis]]`` table, the
scenarios it is refused on (by name, before anything starts), its schedule,
and how it proves itself, against a stand-in for the store's replication
controls (the real store is in tests/stores/test_replica_lag.py)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from knell.nemesis import NemesisContext, kinds
from knell.nemesis.failover import PROMOTION_ALLOWANCE
from knell.nemesis.kind import Action, Busy
from knell.nemesis.replica_lag import ReplicaLag, ReplicaLagSpec
from knell.scenario import Scenario, ScenarioError, load_scenario

BASE = """
name = "x"
description = "x"
duration = "8s"
[store]
kind = "{kind}"
{store}
[[process]]
role = "producer"
[[nemesis]]
fault = "replica-lag"
start = "2s"
{nemesis}
"""


def _load(tmp_path: Path, store: str = "replicas = 1", nemesis: str = "", kind: str = "postgres"):
    path = tmp_path / "s.toml"
    path.write_text(BASE.format(kind=kind, store=store, nemesis=nemesis), encoding="utf-8")
    return load_scenario(path)


def test_the_kind_is_registered_with_its_defaults(tmp_path: Path) -> None:
    scenario = _load(tmp_path)
    (spec,) = scenario.nemesis
    assert isinstance(spec, ReplicaLagSpec) and isinstance(kinds()["replica-lag"], ReplicaLag)
    assert (spec.duration, spec.replica, spec.fail_over) == (2.0, None, False)


@pytest.mark.parametrize(
    ("kind", "store", "said"),
    [
        (
            "postgres",
            "",
            "replica-lag needs a store with replicas, and this postgres store has "
            "none ([store] replicas = 0)",
        ),
        ("sqlite", "", "replica-lag needs a store with replicas, and this sqlite store has none"),
        (
            "redis",
            "replicas = 1",
            "replica-lag cannot hold one replica of a replicated redis store back",
        ),
    ],
)
def test_a_store_that_cannot_hold_a_replica_back_is_refused_by_name(
    tmp_path: Path, kind: str, store: str, said: str
) -> None:
    with pytest.raises(ScenarioError) as info:
        _load(tmp_path, store, kind=kind)
    text = str(info.value)
    assert "s.toml" in text and "nemesis[0]" in text and said in text


def test_a_replica_the_store_does_not_have_is_refused_naming_the_ones_it_has(
    tmp_path: Path,
) -> None:
    with pytest.raises(ScenarioError, match=r"replica = 'pg-3' is not a replica.*pg-1, pg-2"):
        _load(tmp_path, "replicas = 2", 'replica = "pg-3"')
    assert _load(tmp_path, "replicas = 2", 'replica = "pg-2"').nemesis[0].replica == "pg-2"


@pytest.mark.parametrize("field", ['duration = "0s"', 'promote_after = "-1s"', "fail_over = 3"])
def test_a_bad_field_is_refused(tmp_path: Path, field: str) -> None:
    with pytest.raises(ScenarioError, match=field.split()[0]):
        _load(tmp_path, nemesis=field)


@pytest.mark.parametrize(
    ("nemesis", "heal_at"),
    [
        ('duration = "3s"', 5.0),
        ('duration = "3s"\nfail_over = true\npromote_after = "250ms"', 5.25 + PROMOTION_ALLOWANCE),
    ],
)
def test_expand_heals_after_the_lag_or_after_the_promotion(
    tmp_path: Path, nemesis: str, heal_at: float
) -> None:
    scenario = _load(tmp_path, nemesis=nemesis)
    (spec,) = scenario.nemesis
    kind = kinds()["replica-lag"]
    actions = kind.expand(spec, scenario, random.Random(1), Busy(), 0)
    assert [(a.at, a.step, a.target) for a in actions] == [
        (2.0, "apply", "store"),
        (pytest.approx(heal_at), "heal", "store"),
    ]
    assert actions[0].params["fail_over"] == ("fail_over" in nemesis)


class Replication:
    """Stand-in for a replicated store's replication controls: positions
    that move as the test says, and a log of what the fault asked."""

    lagging = False

    def __init__(self, *, replica_follows: bool = False, written_meanwhile: int = 0) -> None:
        self.primary_lsn = 1000
        self.replica_lsn = 1000
        self.replica_follows = replica_follows
        self.written_meanwhile = written_meanwhile
        """Bytes the primary writes before each reading of the positions."""
        self.calls: list[str] = []

    def write(self, size: int) -> None:
        self.primary_lsn += size
        if self.replica_follows or not self.lagging:
            self.replica_lsn = self.primary_lsn

    def hold_replica(self, name: str | None) -> dict[str, Any]:
        self.calls.append(f"hold {name}")
        self.lagging = True
        return {"replica": name or "pg-1", **self.lag_positions("pg-1")}

    def lag_positions(self, name: str) -> dict[str, int]:
        self.write(self.written_meanwhile)
        return {"primary_lsn": self.primary_lsn, "replica_lsn": self.replica_lsn}

    def release_replication(self) -> None:
        self.calls.append("release")
        self.lagging = False

    def wait_caught_up(self, name: str, position: int, timeout: float) -> float:
        self.calls.append(f"caught up {name} {position}")
        return 0.01

    def fail_over(self, how: str, *, promote_after: float, to: str) -> dict[str, Any]:
        self.calls.append(f"fail over {how} to {to}")
        return {"old": "pg-0", "new": to, "how": how, "old_state": "dead"}

    def wait_ready(self, timeout: float) -> None:
        self.calls.append("ready")

    def primary(self) -> str:
        return "pg-1"


def _context(store: Replication, records: list[tuple[str, dict[str, Any]]]) -> NemesisContext:
    scenario = Scenario.model_validate(
        {
            "name": "s",
            "description": "d",
            "duration": 5,
            "store": "postgres",
            "process": [{"role": "producer"}],
        }
    )

    def record(f: str, target: str, **value: Any) -> None:
        records.append((f, value))

    supervisor: Any = None  # a store fault never touches a process
    return NemesisContext(scenario, supervisor, record, stores={"store": store})  # type: ignore[dict-item]


def _action(step: str, **params: Any) -> Action:
    base = {"duration": 0.0, "replica": None, "fail_over": False, "promote_after": 0.0}
    return Action(2.0, "replica-lag", step, "store", 7, {**base, **params})  # type: ignore[arg-type]


def test_a_lag_is_proven_by_both_positions_and_healed_by_a_catch_up() -> None:
    store, records = Replication(), []
    ctx, kind = _context(store, records), ReplicaLag()
    assert kind.apply(_action("apply"), ctx)
    store.write(500)
    assert kind.heal(_action("heal"), ctx)
    assert store.calls == ["hold None", "release", "caught up pg-1 1500"]
    (_, applied), (f, healed) = records
    assert (applied["primary_lsn"], applied["replica_lsn"]) == (1000, 1000)
    assert f == "replica-lag-done"
    assert (healed["behind_bytes"], healed["primary_moved"], healed["replica_moved"]) == (
        500,
        500,
        0,
    )
    assert not ctx.expected_down


def test_a_replica_that_did_not_fall_behind_fails_the_fault() -> None:
    """Replication that was not really held (the replica kept replaying) is
    no lag: the fault says it failed rather than vouch for it."""
    store, records = Replication(replica_follows=True), []
    ctx, kind = _context(store, records), ReplicaLag()
    assert kind.apply(_action("apply"), ctx)
    store.write(500)
    assert not kind.heal(_action("heal"), ctx)
    assert records[-1][0] == "fault-failed"
    assert "pg-1 did not fall behind" in records[-1][1]["error"]
    assert store.calls[-1] == "release"


def test_fail_over_promotes_the_lagging_replica_and_records_a_failover() -> None:
    store, records = Replication(written_meanwhile=300), []
    ctx, kind = _context(store, records), ReplicaLag()
    assert kind.apply(_action("apply", replica="pg-2", fail_over=True), ctx)
    assert store.calls == ["hold pg-2", "fail over kill to pg-2"]
    failover = dict(records)["failover"]
    assert failover["new"] == "pg-2" and failover["lag"]["behind_bytes"] > 0
    assert kind.heal(_action("heal", fail_over=True), ctx)
    assert records[-1][0] == "replica-lag-done" and store.calls[-1] == "ready"


def test_the_final_phase_releases_a_replica_still_held() -> None:
    store, records = Replication(), []
    ctx, kind = _context(store, records), ReplicaLag()
    assert kind.apply(_action("apply"), ctx)
    kind.heal_all(ctx)
    assert store.calls[-1] == "release" and not store.lagging and not ctx.expected_down


def test_two_runs_sharing_the_kind_keep_their_own_lag() -> None:
    """One kind instance serves every run of a process (the matrix runs two
    at a time): one run's final phase must not forget the other's lag."""
    kind = ReplicaLag()
    first, second = Replication(), Replication()
    first_records: list[tuple[str, dict[str, Any]]] = []
    second_records: list[tuple[str, dict[str, Any]]] = []
    first_ctx, second_ctx = _context(first, first_records), _context(second, second_records)
    assert kind.apply(_action("apply"), first_ctx)
    second.primary_lsn = second.replica_lsn = 9000
    assert kind.apply(_action("apply"), second_ctx)
    kind.heal_all(second_ctx)
    first.write(500)
    assert kind.heal(_action("heal"), first_ctx)
    f, healed = first_records[-1]
    assert f == "replica-lag-done" and healed["primary_moved"] == 500, first_records
