"""Every reference bus's role inboxes against every row of the at-most-once
contract, as the seed design's tests list them."""

from __future__ import annotations

import time
from typing import Any

import pytest

from knell.buses import (
    STRANDED_CAP,
    NotDeliveredTo,
    NotHolder,
    RoleBus,
    RoleHeld,
    WrongChannelKind,
)
from tests.contract.conftest import OpenBus

R = Any
"""A reference bus, used through its role half."""


@pytest.fixture
def one(bus: OpenBus) -> R:
    return bus()


def test_one_run_holds_a_role_at_a_time(one: R) -> None:
    assert isinstance(one, RoleBus)
    hold = one.claim_role("reviewer", "run-1", 1.0)
    assert hold.run == "run-1" and hold.expires_at > time.time()
    with pytest.raises(RoleHeld):
        one.claim_role("reviewer", "run-2", 1.0)
    one.claim_role("reviewer", "run-1", 1.0)  # the holder renews
    one.release_role("reviewer", "run-1")
    with pytest.raises(NotHolder):
        one.release_role("reviewer", "run-1")
    one.claim_role("reviewer", "run-2", 1.0)


def test_a_hold_lapses(one: R) -> None:
    one.claim_role("reviewer", "run-1", 0.05)
    time.sleep(0.08)
    one.claim_role("reviewer", "run-2", 1.0)
    with pytest.raises(NotHolder):
        one.receive("run-1")


def test_each_message_is_delivered_at_most_once(one: R) -> None:
    for i in range(3):
        one.post("reviewer", f"m{i}", "sender")
    with pytest.raises(NotHolder):
        one.receive("run-1")
    one.claim_role("reviewer", "run-1", 1.0)
    first = one.receive("run-1", limit=2)
    assert [d.body for d in first] == ["m0", "m1"] and first[0].run == "run-1"
    assert [d.body for d in one.receive("run-1")] == ["m2"]
    assert one.receive("run-1") == []


def test_released_unread_is_stranded_for_the_role_and_never_redelivered(one: R) -> None:
    one.post("reviewer", "m", "sender")
    one.claim_role("reviewer", "run-1", 1.0)
    [delivered] = one.receive("run-1")
    assert one.stranded("reviewer") == []  # the current holder still has it
    one.release_role("reviewer", "run-1")
    one.claim_role("reviewer", "run-2", 1.0)
    assert one.receive("run-2") == []  # never redelivered
    [stranded] = one.stranded("reviewer")
    assert (stranded.id, stranded.body, stranded.sender, stranded.run) == (
        delivered.id,
        "m",
        "sender",
        "run-1",
    )
    assert stranded.delivered_at <= time.time()
    with pytest.raises(NotDeliveredTo):
        one.read(delivered.id, "run-2")


def test_read_is_not_listed_and_dead_holders_strand_too(one: R) -> None:
    one.post("reviewer", "read-me", "s")
    one.post("reviewer", "leave-me", "s")
    one.claim_role("reviewer", "run-1", 0.05)
    got = one.receive("run-1")
    one.read(got[0].id, "run-1")
    one.read(got[0].id, "run-1")  # idempotent for its recipient
    time.sleep(0.08)  # run-1 "dies": its hold lapses without a release
    assert [s.body for s in one.stranded("reviewer")] == ["leave-me"]
    one.claim_role("reviewer", "run-2", 1.0)
    assert [s.body for s in one.stranded("reviewer")] == ["leave-me"]


def test_the_list_is_oldest_first_and_capped(one: R) -> None:
    for i in range(STRANDED_CAP + 5):
        one.post("reviewer", f"m{i}", "s")
    for run in ("run-1", "run-2"):
        one.claim_role("reviewer", run, 1.0)
        one.receive(run, limit=30)
        one.release_role("reviewer", run)
    listed = one.stranded("reviewer")
    assert len(listed) == STRANDED_CAP
    assert [s.body for s in listed] == [f"m{i}" for i in range(STRANDED_CAP)]
    assert [s.delivered_at for s in listed] == sorted(s.delivered_at for s in listed)


def test_a_role_with_none_stranded_lists_nothing(one: R) -> None:
    assert one.stranded("nobody") == []
    one.claim_role("reviewer", "run-1", 1.0)
    assert one.stranded("reviewer") == []


def test_role_channels_refuse_other_kinds(one: R) -> None:
    one.claim_role("reviewer", "run-1", 1.0)
    with pytest.raises(WrongChannelKind):
        one.claim("reviewer", "c", 1.0)
    with pytest.raises(WrongChannelKind):
        one.subscribe("w", "reviewer")
    one.subscribe("w", "feed")
    with pytest.raises(WrongChannelKind):
        one.claim_role("feed", "run-1", 1.0)


# -- more rows of the contract ------------------------------------------------------------


def test_receive_covers_every_held_role_in_name_order(one: R) -> None:
    for role in ("b-role", "a-role"):
        for i in range(3):
            one.post(role, f"{role}:{i}", "s")
        one.claim_role(role, "run-1", 1.0)
    got = one.receive("run-1", limit=4)
    assert [d.body for d in got] == ["a-role:0", "a-role:1", "a-role:2", "b-role:0"]
    assert [(d.role, d.seq) for d in got] == [
        ("a-role", 1),
        ("a-role", 2),
        ("a-role", 3),
        ("b-role", 1),
    ]
    assert [d.body for d in one.receive("run-1")] == ["b-role:1", "b-role:2"]
    one.release_role("a-role", "run-1")
    one.post("a-role", "later", "s")
    one.post("b-role", "later", "s")
    assert [(d.role, d.body) for d in one.receive("run-1")] == [("b-role", "later")]


def test_a_lapsed_holder_receives_nothing_more_and_its_messages_are_stranded(one: R) -> None:
    for i in range(4):
        one.post("reviewer", f"m{i}", "s")
    one.claim_role("reviewer", "run-1", 0.05)
    assert [d.body for d in one.receive("run-1", limit=2)] == ["m0", "m1"]
    time.sleep(0.08)
    with pytest.raises(NotHolder):
        one.receive("run-1")  # lapsed: it holds nothing
    with pytest.raises(NotHolder):
        one.release_role("reviewer", "run-1")
    one.claim_role("reviewer", "run-2", 1.0)
    assert [d.body for d in one.receive("run-2")] == ["m2", "m3"]  # never m0, m1
    assert [(s.body, s.run) for s in one.stranded("reviewer")] == [("m0", "run-1"), ("m1", "run-1")]


def test_one_batch_strands_in_seq_order(one: R) -> None:
    for i in range(12):  # one receive: one delivery time, so seq breaks the tie (9 < 10)
        one.post("reviewer", f"m{i}", "s")
    one.claim_role("reviewer", "run-1", 1.0)
    assert len(one.receive("run-1", limit=12)) == 12
    one.release_role("reviewer", "run-1")
    assert [s.seq for s in one.stranded("reviewer")] == list(range(1, 13))


def test_its_recipient_may_read_after_leaving_and_then_it_is_not_stranded(one: R) -> None:
    one.post("reviewer", "m", "s")
    hold = one.claim_role("reviewer", "run-1", 1.0)
    assert time.time() < hold.expires_at <= time.time() + 1.0
    [got] = one.receive("run-1")
    one.release_role("reviewer", "run-1")
    assert [s.id for s in one.stranded("reviewer")] == [got.id]
    one.read(got.id, "run-1")
    assert one.stranded("reviewer") == []
    with pytest.raises(NotDeliveredTo):
        one.read("reviewer/99", "run-1")  # never delivered


def test_the_holders_own_unread_never_hide_the_stranded(one: R) -> None:
    for i in range(130):
        one.post("reviewer", f"m{i}", "s")
    one.claim_role("reviewer", "run-1", 0.2)
    assert len(one.receive("run-1", limit=120)) == 120  # run-1's, unread: the oldest
    time.sleep(0.25)
    one.claim_role("reviewer", "run-2", 1.0)
    assert len(one.receive("run-2", limit=10)) == 10
    one.release_role("reviewer", "run-2")
    one.claim_role("reviewer", "run-1", 1.0)  # run-1 holds again: its unread are its own
    assert [s.seq for s in one.stranded("reviewer")] == list(range(121, 131))


def test_bad_calls_are_definite_errors_or_refusals(one: R) -> None:
    from knell.buses import DefiniteError

    with pytest.raises(DefiniteError):
        one.claim_role("reviewer", "run-1", 0)
    one.claim_role("reviewer", "run-1", 1.0)
    with pytest.raises(DefiniteError):
        one.receive("run-1", limit=0)
    for bad in ("", "reviewer", "reviewer/x", "/1"):
        with pytest.raises(DefiniteError):
            one.read(bad, "run-1")
    with pytest.raises(NotHolder):
        one.release_role("nobody", "run-1")
    one.subscribe("w", "feed")
    one.declare_queue("jobs", 2)
    for channel in ("feed", "jobs"):
        with pytest.raises(WrongChannelKind):
            one.stranded(channel)
        with pytest.raises(WrongChannelKind):
            one.read(f"{channel}/1", "run-1")
        with pytest.raises(WrongChannelKind):
            one.release_role(channel, "run-1")
