"""The reference SQLite role inbox against every row of the at-most-once
contract, as the seed design's tests list them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from knell.buses import (
    STRANDED_CAP,
    NotDeliveredTo,
    NotHolder,
    RoleBus,
    RoleHeld,
    WrongChannelKind,
    open_bus,
)
from knell.buses.sqlite import SqliteBus


@pytest.fixture
def bus(tmp_path: Path) -> Iterator[SqliteBus]:
    b = open_bus(f"sqlite:///{(tmp_path / 'bus.db').as_posix().lstrip('/')}")
    assert isinstance(b, SqliteBus)
    yield b
    b.close()


def test_one_run_holds_a_role_at_a_time(bus: SqliteBus) -> None:
    assert isinstance(bus, RoleBus)
    hold = bus.claim_role("reviewer", "run-1", 1.0)
    assert hold.run == "run-1" and hold.expires_at > time.time()
    with pytest.raises(RoleHeld):
        bus.claim_role("reviewer", "run-2", 1.0)
    bus.claim_role("reviewer", "run-1", 1.0)  # the holder renews
    bus.release_role("reviewer", "run-1")
    with pytest.raises(NotHolder):
        bus.release_role("reviewer", "run-1")
    bus.claim_role("reviewer", "run-2", 1.0)


def test_a_hold_lapses(bus: SqliteBus) -> None:
    bus.claim_role("reviewer", "run-1", 0.05)
    time.sleep(0.08)
    bus.claim_role("reviewer", "run-2", 1.0)
    with pytest.raises(NotHolder):
        bus.receive("run-1")


def test_each_message_is_delivered_at_most_once(bus: SqliteBus) -> None:
    for i in range(3):
        bus.post("reviewer", f"m{i}", "sender")
    with pytest.raises(NotHolder):
        bus.receive("run-1")
    bus.claim_role("reviewer", "run-1", 1.0)
    first = bus.receive("run-1", limit=2)
    assert [d.body for d in first] == ["m0", "m1"] and first[0].run == "run-1"
    assert [d.body for d in bus.receive("run-1")] == ["m2"]
    assert bus.receive("run-1") == []


def test_released_unread_is_stranded_for_the_role_and_never_redelivered(bus: SqliteBus) -> None:
    bus.post("reviewer", "m", "sender")
    bus.claim_role("reviewer", "run-1", 1.0)
    [delivered] = bus.receive("run-1")
    assert bus.stranded("reviewer") == []  # the current holder still has it
    bus.release_role("reviewer", "run-1")
    bus.claim_role("reviewer", "run-2", 1.0)
    assert bus.receive("run-2") == []  # never redelivered
    [stranded] = bus.stranded("reviewer")
    assert (stranded.id, stranded.body, stranded.sender, stranded.run) == (
        delivered.id,
        "m",
        "sender",
        "run-1",
    )
    assert stranded.delivered_at <= time.time()
    with pytest.raises(NotDeliveredTo):
        bus.read(delivered.id, "run-2")


def test_read_is_not_listed_and_dead_holders_strand_too(bus: SqliteBus) -> None:
    bus.post("reviewer", "read-me", "s")
    bus.post("reviewer", "leave-me", "s")
    bus.claim_role("reviewer", "run-1", 0.05)
    got = bus.receive("run-1")
    bus.read(got[0].id, "run-1")
    bus.read(got[0].id, "run-1")  # idempotent for its recipient
    time.sleep(0.08)  # run-1 "dies": its hold lapses without a release
    assert [s.body for s in bus.stranded("reviewer")] == ["leave-me"]
    bus.claim_role("reviewer", "run-2", 1.0)
    assert [s.body for s in bus.stranded("reviewer")] == ["leave-me"]


def test_the_list_is_oldest_first_and_capped(bus: SqliteBus) -> None:
    for i in range(STRANDED_CAP + 5):
        bus.post("reviewer", f"m{i}", "s")
    for run in ("run-1", "run-2"):
        bus.claim_role("reviewer", run, 1.0)
        bus.receive(run, limit=30)
        bus.release_role("reviewer", run)
    listed = bus.stranded("reviewer")
    assert len(listed) == STRANDED_CAP
    assert [s.body for s in listed] == [f"m{i}" for i in range(STRANDED_CAP)]
    assert [s.delivered_at for s in listed] == sorted(s.delivered_at for s in listed)


def test_a_role_with_none_stranded_lists_nothing(bus: SqliteBus) -> None:
    assert bus.stranded("nobody") == []
    bus.claim_role("reviewer", "run-1", 1.0)
    assert bus.stranded("reviewer") == []


def test_role_channels_refuse_other_kinds(bus: SqliteBus) -> None:
    bus.claim_role("reviewer", "run-1", 1.0)
    with pytest.raises(WrongChannelKind):
        bus.claim("reviewer", "c", 1.0)
    with pytest.raises(WrongChannelKind):
        bus.subscribe("w", "reviewer")
    bus.subscribe("w", "feed")
    with pytest.raises(WrongChannelKind):
        bus.claim_role("feed", "run-1", 1.0)
