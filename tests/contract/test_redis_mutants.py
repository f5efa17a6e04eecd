"""The Redis queue and role mutants really have their seeded bugs (and the
reference does not), shown against a real server: two connections racing
for one queue, and a choreography of runs taking a role in turn."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from knell.buses import Bus, open_bus
from knell.buses.mutants import all_mutants

pytestmark = pytest.mark.integration

REDIS = all_mutants("redis")


def _open(url: str, opened: list[Bus], name: str | None = None) -> Any:
    bus = open_bus(url, None if name is None else REDIS[name].factory)
    opened.append(bus)
    return bus


def test_the_mutants_are_declared_for_their_contracts_scenarios() -> None:
    claim = REDIS["redis-claim-get-then-set"]
    assert (claim.killed_by, claim.scenarios) == (("lease-exclusive",), ("queue-kill-claimers",))
    role = REDIS["redis-role-autoclaim-pending"]
    assert (role.killed_by, role.scenarios) == (("at-most-once",), ("atmostonce-holder-churn",))


def _claim_until_empty(bus: Any, channel: str, name: str, got: list[int]) -> None:
    while (held := bus.claim(channel, name, 30.0)) is not None:
        got.append(held.seq)


def _two_claimers(buses: list[Any], channel: str) -> list[int]:
    """Two connections claim from ``channel`` at once until it is empty
    (30-second leases: nothing lapses); every seq either was leased."""
    got: list[list[int]] = [[], []]
    threads = [
        threading.Thread(target=_claim_until_empty, args=(b, channel, f"c{i}", got[i]))
        for i, b in enumerate(buses)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return got[0] + got[1]


def test_claim_get_then_set_leases_one_message_to_two_consumers(
    redis_url: str, opened: list[Bus]
) -> None:
    ref = [_open(redis_url, opened) for _ in range(2)]
    ref[0].declare_queue("ref", 3)
    for i in range(100):
        ref[0].post("ref", f"m{i}", "p")
    assert sorted(_two_claimers(ref, "ref")) == list(range(1, 101))  # each exactly once
    buses = [_open(redis_url, opened, "redis-claim-get-then-set") for _ in range(2)]
    for attempt in range(5):  # a race: each attempt on a fresh queue
        channel = f"jobs{attempt}"
        buses[0].declare_queue(channel, 3)
        for i in range(100):
            buses[0].post(channel, f"m{i}", "p")
        claimed = _two_claimers(buses, channel)
        assert set(claimed) == set(range(1, 101))
        if len(claimed) > len(set(claimed)):
            return  # a message leased to both consumers, each lease live for 30 s
    pytest.fail("no message was ever leased twice")


def test_autoclaim_pending_redelivers_what_a_departed_run_left_unread(
    redis_url: str, opened: list[Bus]
) -> None:
    def departed_then_next(bus: Any) -> list[str]:
        bus.post("reviewer", "m0", "s")
        bus.post("reviewer", "m1", "s")
        bus.claim_role("reviewer", "run-1", 5.0)
        assert [d.body for d in bus.receive("run-1", limit=1)] == ["m0"]
        bus.release_role("reviewer", "run-1")  # leaves without reading m0
        bus.claim_role("reviewer", "run-2", 5.0)
        return [d.body for d in bus.receive("run-2")]

    bus = _open(redis_url, opened, "redis-role-autoclaim-pending")
    assert departed_then_next(bus) == ["m0", "m1"]  # m0 delivered a second time
    assert bus.stranded("reviewer") == []  # and no longer shown as stranded
    ref = _open(redis_url.replace("prefix=", "prefix=ref"), opened)
    assert departed_then_next(ref) == ["m1"]
    assert [s.body for s in ref.stranded("reviewer")] == ["m0"]
