"""The reference SQLite queue against every row of the queue contract,
including two OS processes claiming from one queue at once."""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from knell.buses import (
    DefiniteError,
    LeaseLost,
    QueueBus,
    WrongChannelKind,
    contracts_of,
    open_bus,
)
from knell.buses.sqlite import SqliteBus


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{(tmp_path / 'bus.db').as_posix().lstrip('/')}?poll_interval=0.02"


@pytest.fixture
def bus(url: str) -> Iterator[SqliteBus]:
    b = open_bus(url)
    assert isinstance(b, SqliteBus)
    yield b
    b.close()


def test_the_reference_bus_declares_every_contract(bus: SqliteBus) -> None:
    assert contracts_of(bus) == {"broadcast", "queue", "at-most-once"}
    assert isinstance(bus, QueueBus)


def test_declare_is_idempotent_and_the_first_wins(bus: SqliteBus) -> None:
    info = bus.declare_queue("jobs", 3)
    assert (info.channel, info.max_deliveries, info.sweep_interval) == ("jobs", 3, 0.0)
    assert bus.declare_queue("jobs", 7).max_deliveries == 3
    with pytest.raises(DefiniteError):
        bus.declare_queue("other", 0)


def test_claim_takes_the_oldest_and_counts_deliveries(bus: SqliteBus) -> None:
    bus.declare_queue("jobs", 3)
    assert bus.claim("jobs", "a", 1.0) is None
    for i in range(3):
        bus.post("jobs", f"m{i}", "p")
    first = bus.claim("jobs", "a", 1.0)
    second = bus.claim("jobs", "b", 1.0)
    assert first is not None and second is not None
    assert (first.seq, first.body, first.consumer, first.deliveries) == (1, "m0", "a", 1)
    assert (second.seq, second.body, second.consumer) == (2, "m1", "b")
    assert first.expires_at > time.time()


def test_done_is_terminal_and_only_for_the_holder(bus: SqliteBus) -> None:
    bus.post("jobs", "m", "p")
    held = bus.claim("jobs", "a", 1.0)
    assert held is not None
    with pytest.raises(LeaseLost):
        bus.done(held.id, "b")  # not the holder
    bus.done(held.id, "a")
    with pytest.raises(LeaseLost):
        bus.done(held.id, "a")  # done is terminal: nothing left to hold
    with pytest.raises(LeaseLost):
        bus.renew(held.id, "a", 1.0)
    assert bus.claim("jobs", "c", 1.0) is None


def test_a_lapsed_lease_requeues_with_its_count_kept(bus: SqliteBus) -> None:
    bus.declare_queue("jobs", 3)
    bus.post("jobs", "m", "p")
    held = bus.claim("jobs", "a", 0.05)
    assert held is not None
    assert bus.claim("jobs", "b", 1.0) is None  # still leased
    time.sleep(0.08)
    for verb in (bus.done, bus.release):
        with pytest.raises(LeaseLost):
            verb(held.id, "a")  # lapsed: the holder holds nothing
    with pytest.raises(LeaseLost):
        bus.renew(held.id, "a", 1.0)
    again = bus.claim("jobs", "b", 1.0)
    assert again is not None and again.id == held.id and again.deliveries == 2


def test_renew_keeps_the_lease(bus: SqliteBus) -> None:
    bus.post("jobs", "m", "p")
    held = bus.claim("jobs", "a", 0.1)
    assert held is not None
    for _ in range(4):
        time.sleep(0.05)
        renewed = bus.renew(held.id, "a", 0.1)
        assert renewed.expires_at > time.time()
    assert bus.claim("jobs", "b", 1.0) is None
    bus.done(held.id, "a")


def test_release_requeues_now_and_dead_after_max_deliveries(bus: SqliteBus) -> None:
    bus.declare_queue("jobs", 2)
    bus.post("jobs", "poison", "p")
    bus.post("jobs", "good", "p")
    first = bus.claim("jobs", "a", 1.0)
    assert first is not None and first.body == "poison"
    bus.release(first.id, "a")
    second = bus.claim("jobs", "b", 0.05)  # released: the oldest claimable again
    assert second is not None and second.id == first.id and second.deliveries == 2
    assert bus.dead("jobs") == []
    time.sleep(0.08)  # its second (last) lease lapses: dead, never claimable again
    [dead] = bus.dead("jobs")
    assert (dead.id, dead.body, dead.deliveries) == (first.id, "poison", 2)
    good = bus.claim("jobs", "c", 1.0)
    assert good is not None and good.body == "good"
    assert bus.claim("jobs", "c", 1.0) is None
    bus.release(good.id, "c")
    assert [d.body for d in bus.dead("jobs")] == ["poison"]
    assert [d.body for d in bus.dead("jobs", after=dead.seq)] == []


def test_release_of_the_last_delivery_is_dead_at_once(bus: SqliteBus) -> None:
    bus.declare_queue("jobs", 1)
    bus.post("jobs", "m", "p")
    held = bus.claim("jobs", "a", 10.0)
    assert held is not None
    bus.release(held.id, "a")
    assert [d.body for d in bus.dead("jobs")] == ["m"]
    assert bus.claim("jobs", "b", 1.0) is None


def test_wrong_channel_kind_is_refused_both_ways(bus: SqliteBus) -> None:
    bus.subscribe("w", "feed")
    bus.post("feed", "m", "p")
    with pytest.raises(WrongChannelKind):
        bus.claim("feed", "a", 1.0)
    with pytest.raises(WrongChannelKind):
        bus.declare_queue("feed", 3)
    bus.declare_queue("jobs", 3)
    bus.post("jobs", "m", "p")  # post is shared by every kind
    held = bus.claim("jobs", "a", 1.0)
    assert held is not None
    for call in (
        lambda: bus.subscribe("w", "jobs"),
        lambda: bus.fetch("w", "jobs", after=0),
        lambda: bus.ack("w", "jobs", 1),
        lambda: bus.cursor("w", "jobs"),
        lambda: bus.claim_role("jobs", "run", 1.0),
    ):
        with pytest.raises(WrongChannelKind):
            call()
    with pytest.raises(WrongChannelKind):
        bus.done("feed/1", "a")


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


def test_bad_ids_and_leases_are_definite_errors(bus: SqliteBus) -> None:
    for bad in ("", "jobs", "jobs/x", "/3"):
        with pytest.raises(DefiniteError):
            bus.done(bad, "a")
    with pytest.raises(DefiniteError):
        bus.claim("jobs", "a", 0)


def _claim_all(url: str, name: str, out: mp.Queue[list[str]]) -> None:
    b = open_bus(url)
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


def test_two_processes_claiming_never_win_the_same_message(url: str) -> None:
    b = open_bus(url)
    b.declare_queue("jobs", 3)
    for i in range(300):
        b.post("jobs", f"m{i}", "p")
    ctx = mp.get_context("spawn")
    results: mp.Queue[list[str]] = ctx.Queue()
    procs = [ctx.Process(target=_claim_all, args=(url, f"c{i}", results)) for i in range(2)]
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
    module.odd = lambda url: type("Odd", (), {"contracts": {"stream"}})()  # type: ignore[attr-defined]
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
