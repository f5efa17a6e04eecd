"""Each queue, at-most-once and stream mutant really has its seeded bug, at the bus
level (and the reference does not): fast, no worker processes."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from knell.buses import LeaseLost, NotDeliveredTo, open_bus
from knell.buses.mutants import all_mutants
from knell.buses.sqlite import SqliteBus

MUTANTS = all_mutants()


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{(tmp_path / 'bus.db').as_posix().lstrip('/')}"


@pytest.fixture
def opened() -> Iterator[list[SqliteBus]]:
    buses: list[SqliteBus] = []
    yield buses
    for bus in buses:
        bus.close()


def bus(url: str, opened: list[SqliteBus], name: str | None = None) -> SqliteBus:
    b = open_bus(url, None if name is None else MUTANTS[name].factory)
    assert isinstance(b, SqliteBus)
    opened.append(b)
    return b


def _race(who: SqliteBus, name: str, start: threading.Barrier, won: dict[str, str]) -> None:
    start.wait()
    got = who.claim("jobs", name, 10.0)
    if got is not None:
        won[name] = got.body
        with contextlib.suppress(LeaseLost):  # the other winner overwrote the lease
            who.done(got.id, name)


def test_claim_without_guard_lets_two_consumers_win(url: str, opened: list[SqliteBus]) -> None:
    a, b = bus(url, opened, "claim-without-guard"), bus(url, opened, "claim-without-guard")
    a.declare_queue("jobs", 99)
    for attempt in range(20):
        a.post("jobs", f"m{attempt}", "p")
        start = threading.Barrier(2)
        won: dict[str, str] = {}
        threads = [
            threading.Thread(target=_race, args=(x, n, start, won)) for x, n in ((a, "a"), (b, "b"))
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if len(won) == 2 and won["a"] == won["b"]:
            return  # both read it as free inside the race window, both won it
    pytest.fail("two racing claims never both won one message")


def test_lease_never_expires(url: str, opened: list[SqliteBus]) -> None:
    m = bus(url, opened, "lease-never-expires")
    m.post("jobs", "m", "p")
    assert m.claim("jobs", "a", 0.02) is not None
    time.sleep(0.05)
    assert m.claim("jobs", "b", 1.0) is None  # stuck with its lapsed lease
    assert bus(url, opened).claim("jobs", "b", 1.0) is not None  # the reference takes it back


def test_attempts_reset_on_requeue(url: str, opened: list[SqliteBus]) -> None:
    m = bus(url, opened, "attempts-reset-on-requeue")
    m.declare_queue("jobs", 2)
    m.post("jobs", "poison", "p")
    for _ in range(4):  # more than max_deliveries, never dead
        got = m.claim("jobs", "a", 10.0)
        assert got is not None and got.deliveries == 1
        m.release(got.id, "a")
    assert m.dead("jobs") == []


def test_dead_letter_dropped(url: str, opened: list[SqliteBus]) -> None:
    m = bus(url, opened, "dead-letter-dropped")
    m.declare_queue("jobs", 1)
    m.post("jobs", "poison", "p")
    got = m.claim("jobs", "a", 10.0)
    assert got is not None
    m.release(got.id, "a")
    assert m.claim("jobs", "b", 1.0) is None and m.dead("jobs") == []  # gone
    assert bus(url, opened).dead("jobs") == []  # not even the reference can see it


def test_done_from_lapsed_holder(url: str, opened: list[SqliteBus]) -> None:
    m = bus(url, opened, "done-from-lapsed-holder")
    m.post("jobs", "m", "p")
    mine = m.claim("jobs", "a", 0.02)
    assert mine is not None
    time.sleep(0.05)
    assert m.claim("jobs", "b", 10.0) is not None  # b owns it now
    m.done(mine.id, "a")  # accepted from the lapsed holder
    with pytest.raises(LeaseLost):
        m.done(mine.id, "b")


def test_done_not_terminal(url: str, opened: list[SqliteBus]) -> None:
    m = bus(url, opened, "done-not-terminal")
    m.post("jobs", "m", "p")
    got = m.claim("jobs", "a", 10.0)
    assert got is not None
    m.done(got.id, "a")
    again = m.claim("jobs", "b", 10.0)
    assert again is not None and again.id == got.id


def test_redeliver_to_new_holder(url: str, opened: list[SqliteBus]) -> None:
    m = bus(url, opened, "redeliver-to-new-holder")
    m.post("reviewer", "m", "s")
    m.claim_role("reviewer", "run-1", 10.0)
    assert [d.body for d in m.receive("run-1")] == ["m"]
    m.release_role("reviewer", "run-1")
    m.claim_role("reviewer", "run-2", 10.0)
    assert [d.body for d in m.receive("run-2")] == ["m"]  # delivered twice


def test_receive_unchecked_update(url: str, opened: list[SqliteBus]) -> None:
    """Two receivers of one inbox whose calls overlap (both choose before
    either marks) are both handed the message; one at a time, nothing shows."""
    from knell.buses.mutants.roles import ReceiveUncheckedUpdateBus

    m1 = bus(url, opened, "receive-unchecked-update")
    m2 = bus(url, opened, "receive-unchecked-update")
    assert isinstance(m1, ReceiveUncheckedUpdateBus) and isinstance(m2, ReceiveUncheckedUpdateBus)
    m1.post("reviewer", "m", "s")
    m1.claim_role("reviewer", "crew", 10.0)
    now = time.time()
    one, two = m1._choose("crew", 5, now), m2._choose("crew", 5, now)
    assert one is not None and two is not None
    assert [d.body for d in m1._mark(one, "crew", now)] == ["m"]
    assert [d.body for d in m2._mark(two, "crew", now)] == ["m"]  # handed out twice
    m1.post("reviewer", "n", "s")
    assert [d.body for d in m1.receive("crew")] == ["n"]  # alone, each call looks right
    assert m2.receive("crew") == []


def test_stranded_misses_dead_runs(url: str, opened: list[SqliteBus]) -> None:
    m = bus(url, opened, "stranded-misses-dead-runs")
    m.post("reviewer", "left", "s")
    m.post("reviewer", "died", "s")
    m.claim_role("reviewer", "run-1", 10.0)
    m.receive("run-1", limit=1)
    m.release_role("reviewer", "run-1")
    m.claim_role("reviewer", "run-2", 0.02)
    m.receive("run-2", limit=1)
    time.sleep(0.05)  # run-2 dies: its hold lapses without a release
    assert [s.body for s in m.stranded("reviewer")] == ["left"]
    assert [s.body for s in bus(url, opened).stranded("reviewer")] == ["left", "died"]


def test_read_by_any_run(url: str, opened: list[SqliteBus]) -> None:
    m = bus(url, opened, "read-by-any-run")
    m.post("reviewer", "m", "s")
    m.claim_role("reviewer", "run-1", 10.0)
    [d] = m.receive("run-1")
    m.read(d.id, "someone-else")
    with pytest.raises(NotDeliveredTo):
        bus(url, opened).read(d.id, "someone-else")


def test_receive_marks_read(url: str, opened: list[SqliteBus]) -> None:
    m = bus(url, opened, "receive-marks-read")
    m.post("reviewer", "m", "s")
    m.claim_role("reviewer", "run-1", 10.0)
    m.receive("run-1")
    m.release_role("reviewer", "run-1")
    assert m.stranded("reviewer") == []  # what run-1 never read is nowhere


def test_stranded_newest_first(url: str, opened: list[SqliteBus]) -> None:
    m = bus(url, opened, "stranded-newest-first")
    for body in ("old", "new"):
        m.post("reviewer", body, "s")
    for run in ("run-1", "run-2"):
        m.claim_role("reviewer", run, 10.0)
        m.receive(run, limit=1)
        m.release_role("reviewer", run)
        time.sleep(0.01)
    assert [s.body for s in m.stranded("reviewer")] == ["new", "old"]
    assert [s.body for s in bus(url, opened).stranded("reviewer")] == ["old", "new"]


# -- stream rings ----------------------------------------------------------------------


def _ring(b: SqliteBus, posts: int) -> None:
    b.declare_stream("ticks", max_len=3)
    for i in range(posts):
        b.post("ticks", f"m{i + 1}", "p")


@pytest.mark.parametrize("name", [None, "ring-skips-silently"])
def test_ring_skips_silently_drops_without_moving_first(
    url: str, opened: list[SqliteBus], name: str | None
) -> None:
    b = bus(url, opened, name)
    _ring(b, 6)
    page = b.tail("ticks", after=1)
    assert [m.seq for m in page.messages] == [4, 5, 6]  # 2 and 3 are gone either way
    assert (page.first == 4) is (name is None)  # the mutant does not say so


@pytest.mark.parametrize("name", [None, "tail-after-inclusive"])
def test_tail_after_inclusive_repeats_the_last_read(
    url: str, opened: list[SqliteBus], name: str | None
) -> None:
    b = bus(url, opened, name)
    _ring(b, 3)
    seqs = [m.seq for m in b.tail("ticks", after=2).messages]
    assert seqs == ([3] if name is None else [2, 3])


@pytest.mark.parametrize("name", [None, "ring-never-trims"])
def test_ring_never_trims_grows_past_its_bound(
    url: str, opened: list[SqliteBus], name: str | None
) -> None:
    b = bus(url, opened, name)
    _ring(b, 6)
    page = b.tail("ticks")
    assert len(page.messages) == (3 if name is None else 6)
    assert [b.post("ticks", "m7", "p").seq, b.post("ticks", "m8", "p").seq] == [7, 8]
