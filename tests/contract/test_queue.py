"""Every reference bus's queue channels against every row of the queue
contract, including two OS processes claiming from one queue at once;
and every target that declares the queue contract (the rows its system
cannot keep marked in ``TARGET_LIMITS``)."""

from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path
from typing import Any

import pytest

from knell.buses import (
    CONTRACTS,
    DefiniteError,
    LeaseLost,
    QueueBus,
    WrongChannelKind,
    contracts_of,
    open_bus,
)
from tests.contract.conftest import BACKENDS, TARGETS, OpenBus

Q = Any
"""A reference bus, used through its queue half (every reference bus
implements all three contracts)."""


@pytest.fixture(params=[*BACKENDS, *TARGETS])
def kind(request: pytest.FixtureRequest) -> str:
    """The reference buses and the targets of the queue contract."""
    return str(request.param)


@pytest.fixture
def one(bus: OpenBus) -> Q:
    return bus()


def test_the_reference_bus_declares_every_contract(one: Q) -> None:
    declared = contracts_of(one)
    assert {"broadcast", "queue", "at-most-once"} <= declared <= set(CONTRACTS)
    assert isinstance(one, QueueBus)


def test_declare_is_idempotent_and_the_first_wins(one: Q) -> None:
    info = one.declare_queue("jobs", 3)
    assert (info.channel, info.max_deliveries, info.sweep_interval) == ("jobs", 3, 0.0)
    assert one.declare_queue("jobs", 7).max_deliveries == 3
    with pytest.raises(DefiniteError):
        one.declare_queue("other", 0)


def test_claim_takes_the_oldest_and_counts_deliveries(one: Q) -> None:
    one.declare_queue("jobs", 3)
    assert one.claim("jobs", "a", 1.0) is None
    for i in range(3):
        one.post("jobs", f"m{i}", "p")
    first = one.claim("jobs", "a", 1.0)
    second = one.claim("jobs", "b", 1.0)
    assert first is not None and second is not None
    assert (first.seq, first.body, first.consumer, first.deliveries) == (1, "m0", "a", 1)
    assert (second.seq, second.body, second.consumer) == (2, "m1", "b")
    assert first.expires_at > time.time()


def test_done_is_terminal_and_only_for_the_holder(one: Q) -> None:
    one.post("jobs", "m", "p")
    held = one.claim("jobs", "a", 1.0)
    assert held is not None
    with pytest.raises(LeaseLost):
        one.done(held.id, "b")  # not the holder
    one.done(held.id, "a")
    with pytest.raises(LeaseLost):
        one.done(held.id, "a")  # done is terminal: nothing left to hold
    with pytest.raises(LeaseLost):
        one.renew(held.id, "a", 1.0)
    assert one.claim("jobs", "c", 1.0) is None


def test_a_lapsed_lease_requeues_with_its_count_kept(one: Q) -> None:
    one.declare_queue("jobs", 3)
    one.post("jobs", "m", "p")
    held = one.claim("jobs", "a", 0.05)
    assert held is not None
    assert one.claim("jobs", "b", 1.0) is None  # still leased
    time.sleep(0.08)
    for verb in (one.done, one.release):
        with pytest.raises(LeaseLost):
            verb(held.id, "a")  # lapsed: the holder holds nothing
    with pytest.raises(LeaseLost):
        one.renew(held.id, "a", 1.0)
    again = one.claim("jobs", "b", 1.0)
    assert again is not None and again.id == held.id and again.deliveries == 2


def test_renew_keeps_the_lease(one: Q) -> None:
    one.post("jobs", "m", "p")
    held = one.claim("jobs", "a", 0.1)
    assert held is not None
    for _ in range(4):
        time.sleep(0.05)
        renewed = one.renew(held.id, "a", 0.1)
        assert renewed.expires_at > time.time()
    assert one.claim("jobs", "b", 1.0) is None
    one.done(held.id, "a")


def test_release_requeues_now_and_dead_after_max_deliveries(one: Q) -> None:
    one.declare_queue("jobs", 2)
    one.post("jobs", "poison", "p")
    one.post("jobs", "good", "p")
    first = one.claim("jobs", "a", 1.0)
    assert first is not None and first.body == "poison"
    one.release(first.id, "a")
    second = one.claim("jobs", "b", 0.05)  # released: the oldest claimable again
    assert second is not None and second.id == first.id and second.deliveries == 2
    assert one.dead("jobs") == []
    time.sleep(0.08)  # its second (last) lease lapses: dead, never claimable again
    [dead] = one.dead("jobs")
    assert (dead.id, dead.body, dead.deliveries) == (first.id, "poison", 2)
    good = one.claim("jobs", "c", 1.0)
    assert good is not None and good.body == "good"
    assert one.claim("jobs", "c", 1.0) is None
    one.release(good.id, "c")
    assert [d.body for d in one.dead("jobs")] == ["poison"]
    assert [d.body for d in one.dead("jobs", after=dead.seq)] == []


def test_release_of_the_last_delivery_is_dead_at_once(one: Q) -> None:
    one.declare_queue("jobs", 1)
    one.post("jobs", "m", "p")
    held = one.claim("jobs", "a", 10.0)
    assert held is not None
    one.release(held.id, "a")
    assert [d.body for d in one.dead("jobs")] == ["m"]
    assert one.claim("jobs", "b", 1.0) is None


def test_wrong_channel_kind_is_refused_both_ways(one: Q) -> None:
    one.subscribe("w", "feed")
    one.post("feed", "m", "p")
    with pytest.raises(WrongChannelKind):
        one.claim("feed", "a", 1.0)
    with pytest.raises(WrongChannelKind):
        one.declare_queue("feed", 3)
    one.declare_queue("jobs", 3)
    one.post("jobs", "m", "p")  # post is shared by every kind
    held = one.claim("jobs", "a", 1.0)
    assert held is not None
    for call in (
        lambda: one.subscribe("w", "jobs"),
        lambda: one.fetch("w", "jobs", after=0),
        lambda: one.ack("w", "jobs", 1),
        lambda: one.cursor("w", "jobs"),
        lambda: one.claim_role("jobs", "run", 1.0),
    ):
        with pytest.raises(WrongChannelKind):
            call()
    with pytest.raises(WrongChannelKind):
        one.done("feed/1", "a")


def test_a_claim_fixes_an_undeclared_channel_as_a_queue(url: str) -> None:
    b = open_bus(url + "&max_deliveries=4")
    try:
        b.post("jobs", "m", "p")
        assert b.claim("jobs", "a", 1.0) is not None
        assert b.declare_queue("jobs", 9).max_deliveries == 4  # the bus's default won
        with pytest.raises(WrongChannelKind):
            b.subscribe("w", "jobs")
    finally:
        b.close()


def test_bad_ids_and_leases_are_definite_errors(one: Q) -> None:
    for bad in ("", "jobs", "jobs/x", "/3"):
        with pytest.raises(DefiniteError):
            one.done(bad, "a")
    with pytest.raises(DefiniteError):
        one.claim("jobs", "a", 0)


def claim_all(url: str, name: str, out: mp.Queue[list[str]], driver: str | None = None) -> None:
    """One claiming process: claim and finish until the queue stays empty,
    then report what it got (a target's suite reuses it with its driver)."""
    b = open_bus(url, driver)
    got: list[str] = []
    idle = 0
    while idle < 20:
        held = b.claim("jobs", name, 30.0)
        if held is None:
            idle += 1
            time.sleep(0.005)
            continue
        idle = 0
        got.append(held.body)
        b.done(held.id, name)
    out.put(got)
    b.close()


@pytest.mark.integration  # starts two claiming processes
def test_two_processes_claiming_never_win_the_same_message(url: str) -> None:
    b = open_bus(url)
    b.declare_queue("jobs", 3)
    for i in range(300):
        b.post("jobs", f"m{i}", "p")
    ctx = mp.get_context("spawn")
    results: mp.Queue[list[str]] = ctx.Queue()
    procs = [ctx.Process(target=claim_all, args=(url, f"c{i}", results)) for i in range(2)]
    for p in procs:
        p.start()
    got = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    claimed = got[0] + got[1]
    assert sorted(claimed) == sorted(f"m{i}" for i in range(300))  # each exactly once
    assert b.claim("jobs", "late", 1.0) is None
    b.close()


def test_a_bus_declares_its_contracts_and_open_bus_checks_their_methods(tmp_path: Path) -> None:
    from knell.buses import ContractMissing, DriverError, require_contract

    class QueueOnly:
        contracts = ("queue",)

        def __getattr__(self, name: str) -> object:
            if name in ("declare_queue", "post", "claim", "renew", "done", "release", "dead"):
                return lambda *a: None
            if name == "close":
                return lambda: None
            raise AttributeError(name)

    url = f"sqlite:///{(tmp_path / 'x.db').as_posix().lstrip('/')}"
    import sys
    import types

    module = types.ModuleType("queue_only_for_test")
    module.make = lambda url: QueueOnly()  # type: ignore[attr-defined]
    module.half = lambda url: type("Half", (), {"contracts": {"queue"}, "claim": print})()  # type: ignore[attr-defined]
    module.odd = lambda url: type("Odd", (), {"contracts": {"sharded"}})()  # type: ignore[attr-defined]
    sys.modules["queue_only_for_test"] = module
    try:
        bus = open_bus(url, "queue_only_for_test:make")  # no broadcast method needed
        assert contracts_of(bus) == {"queue"}
        require_contract(bus, "queue", "q", "s")
        with pytest.raises(ContractMissing, match="tests the at-most-once contract"):
            require_contract(bus, "at-most-once", "q", "s")
        with pytest.raises(DriverError, match="not a queue bus: it has no declare_queue"):
            open_bus(url, "queue_only_for_test:half")
        with pytest.raises(DriverError, match="known contracts"):
            open_bus(url, "queue_only_for_test:odd")
    finally:
        del sys.modules["queue_only_for_test"]
    assert contracts_of(object()) == {"broadcast"}  # a bus that declares nothing


# -- more rows of the contract: sweeping many, dead paging, ordering, refusals ---------


def test_one_claim_sweeps_many_lapsed_leases_oldest_first(one: Q) -> None:
    # Leases of a second, and waits until each has lapsed by the bus's own
    # stamps: 50 ms leases lapsed before thirty claims were made on a
    # loaded CI machine.
    lease = 1.0
    one.declare_queue("jobs", 2)
    for i in range(30):
        one.post("jobs", f"m{i}", "p")
    first = [one.claim("jobs", f"c{i}", lease) for i in range(30)]
    assert [c.seq for c in first if c is not None] == list(range(1, 31))
    assert one.claim("jobs", "late", lease) is None  # every message leased
    _sleep_past(first)  # all thirty lapse, with one delivery left each
    again = [one.claim("jobs", "b", lease) for _ in range(30)]
    assert [(c.seq, c.deliveries) for c in again if c is not None] == [(i, 2) for i in range(1, 31)]
    assert one.claim("jobs", "b", lease) is None
    assert one.dead("jobs") == []
    _sleep_past(again)  # their last leases lapse: dead, listed before any claim sweeps them
    listed = one.dead("jobs")
    assert [d.seq for d in listed] == list(range(1, 31))
    assert [d.died_at for d in listed] == pytest.approx(
        [c.expires_at for c in again if c is not None], abs=1e-5
    )
    assert one.claim("jobs", "b", 1.0) is None  # swept now: still dead, never claimable
    assert [(d.seq, d.deliveries) for d in one.dead("jobs")] == [(i, 2) for i in range(1, 31)]


def _sleep_past(claims: list[Any]) -> None:
    """Until every claim's lease has lapsed by its own ``expires_at``."""
    time.sleep(max(0.0, max(c.expires_at for c in claims if c is not None) - time.time()) + 0.03)


def test_dead_pages_by_seq_over_swept_and_unswept_letters(one: Q) -> None:
    one.declare_queue("jobs", 1)
    for i in range(6):
        one.post("jobs", f"m{i}", "p")
    held = [one.claim("jobs", "a", 10.0 if i % 2 == 0 else 0.05) for i in range(6)]
    assert all(h is not None for h in held)
    for h in held[::2]:
        assert h is not None
        one.release(h.id, "a")  # its only delivery: dead at once (seqs 1, 3, 5)
    time.sleep(0.08)  # seqs 2, 4, 6 lapse with their only delivery used: dead too
    for _ in range(2):  # before and after a claim has swept the lapsed ones
        assert [d.seq for d in one.dead("jobs", limit=2)] == [1, 2]
        assert [d.seq for d in one.dead("jobs", after=2, limit=2)] == [3, 4]
        assert [d.seq for d in one.dead("jobs", after=4, limit=10)] == [5, 6]
        assert one.dead("jobs", after=6) == []
        lapsed = {d.seq: d.died_at for d in one.dead("jobs")}
        for h in held[1::2]:
            assert h is not None
            assert lapsed[h.seq] == pytest.approx(h.expires_at, abs=1e-5)  # when it lapsed
        assert one.claim("jobs", "b", 1.0) is None
    with pytest.raises(DefiniteError):
        one.dead("jobs", limit=0)


def test_dead_on_a_channel_of_no_kind_is_empty_and_on_a_feed_refused(one: Q) -> None:
    assert one.dead("nothing-yet") == []
    one.subscribe("w", "feed")
    with pytest.raises(WrongChannelKind):
        one.dead("feed")


def test_the_oldest_claimable_wins_whatever_made_it_claimable(one: Q) -> None:
    one.declare_queue("jobs", 5)
    for i in range(4):
        one.post("jobs", f"m{i}", "p")
    lapsing = one.claim("jobs", "a", 0.05)  # seq 1: will lapse
    released = one.claim("jobs", "a", 10.0)  # seq 2: released below
    assert lapsing is not None and released is not None
    one.release(released.id, "a")
    time.sleep(0.08)
    order = [one.claim("jobs", "b", 10.0) for _ in range(4)]
    assert [(c.seq, c.deliveries) for c in order if c is not None] == [
        (1, 2),  # lapsed, the oldest
        (2, 2),  # released
        (3, 1),  # never claimed
        (4, 1),
    ]
    assert one.claim("jobs", "b", 1.0) is None


def test_renew_extends_past_the_first_expiry_and_only_for_the_holder(one: Q) -> None:
    one.post("jobs", "m", "p")
    held = one.claim("jobs", "a", 0.05)
    assert held is not None
    with pytest.raises(LeaseLost):
        one.renew(held.id, "b", 1.0)
    with pytest.raises(LeaseLost):
        one.release(held.id, "b")
    renewed = one.renew(held.id, "a", 1.0)
    assert (renewed.id, renewed.body, renewed.consumer, renewed.deliveries) == (
        held.id,
        "m",
        "a",
        1,
    )
    assert renewed.expires_at > held.expires_at + 0.5
    time.sleep(0.08)  # past the first expiry: the renewed lease still holds
    assert one.claim("jobs", "b", 1.0) is None
    one.done(held.id, "a")
    with pytest.raises(LeaseLost):
        one.done("jobs/99", "a")  # no such message: nothing to hold


def test_declare_refuses_what_is_not_a_positive_int(one: Q) -> None:
    for bad in (True, 1.5, "3", 0, -2):
        with pytest.raises(DefiniteError):
            one.declare_queue("jobs", bad)
    assert one.declare_queue("jobs", 2).max_deliveries == 2  # nothing was fixed above


def test_a_queue_refuses_every_broadcast_read_even_unsubscribed(one: Q) -> None:
    one.post("jobs", "m", "p")
    assert [m.body for m in one.fetch("w", "jobs", after=0)] == ["m"]  # no kind yet: a peek
    one.declare_queue("jobs", 2)
    for call in (
        lambda: one.fetch("w", "jobs", after=0),
        lambda: one.fetch("w", "jobs"),
        lambda: one.cursor("w", "jobs"),
        lambda: one.ack("w", "jobs", 1),
        lambda: one.subscribe("w", "jobs", at="start"),
    ):
        with pytest.raises(WrongChannelKind):
            call()
    assert one.head("jobs") == 1  # head and post stay kind-neutral
    assert one.post("jobs", "m2", "p").seq == 2
