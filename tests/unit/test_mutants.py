"""Each mutant bus really has its seeded bug, at the bus level.

The matrix only means something if every mutant misbehaves in exactly the
way its name says (and the reference does not): these tests pin that down
directly against the store, fast and without worker processes.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from knell.buses import AckBeyondHead, Bus, open_bus, resolve_driver
from knell.buses.mutants import all_mutants
from knell.buses.mutants.sqlite import SeqOutsideLockBus
from knell.buses.sqlite import SqliteBus
from knell.checker import CHECKS

MUTANTS = all_mutants()


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{(tmp_path / 'bus.db').as_posix().lstrip('/')}?poll_interval=0.02"


@pytest.fixture
def opened(url: str) -> Iterator[list[Bus]]:
    buses: list[Bus] = []
    yield buses
    for bus in buses:
        bus.close()


def mutant(name: str, url: str, opened: list[Bus]) -> SqliteBus:
    bus = open_bus(url, MUTANTS[name].factory)
    assert isinstance(bus, SqliteBus)
    opened.append(bus)
    return bus


def reference(url: str, opened: list[Bus]) -> SqliteBus:
    bus = open_bus(url)
    assert isinstance(bus, SqliteBus)
    opened.append(bus)
    return bus


# -- the registry ----------------------------------------------------------------


def test_registry_names_failure_modes_and_known_checks() -> None:
    checks = {cls.name: cls for cls in CHECKS}
    assert len(MUTANTS) >= 12
    for name, m in MUTANTS.items():
        assert m.name == name and m.failure_mode and m.rule
        assert m.factory.startswith("knell.buses.mutants:")
        factory = resolve_driver("sqlite:///x.db", m.factory)
        assert callable(factory)
        assert m.killed_by, name
        for expected in m.killed_by:
            check, _, kind = expected.partition(":")
            assert check in checks, expected
            if kind:
                assert kind in checks[check].anomaly_kinds, expected


def test_every_mutant_opens_through_the_driver_path(url: str, opened: list[Bus]) -> None:
    for name in all_mutants("sqlite"):  # the network stores' mutants: tests/contract
        m = MUTANTS[name]
        assert (m.cls.__doc__ or "").startswith("Failure mode:"), name
        if not issubclass(m.cls, SqliteBus):
            continue  # bridge mutants wrap the bus; stdio ones run in another language
        bus = mutant(name, url, opened)
        doc = type(bus).__doc__ or ""
        assert doc.startswith("Failure mode:"), name
        assert bus.subscribe("w", "a") >= 0
        assert bus.post("a", f"{name}-1", "p").seq >= 1


# -- cursors ---------------------------------------------------------------------


def test_stale_ack_regresses_the_cursor(url: str, opened: list[Bus]) -> None:
    bus = mutant("stale-ack-regresses", url, opened)
    bus.subscribe("w", "a")
    for i in range(5):
        bus.post("a", f"m{i}", "p")
    assert bus.ack("w", "a", 4) == 4
    assert bus.ack("w", "a", 2) == 2  # the stale ack wins
    assert bus.cursor("w", "a") == 2
    ref = reference(url, opened)
    assert ref.ack("w", "a", 4) == 4 and ref.ack("w", "a", 2) == 4


def test_ack_beyond_head_is_accepted(url: str, opened: list[Bus]) -> None:
    bus = mutant("ack-beyond-head-accepted", url, opened)
    bus.subscribe("w", "a")
    bus.post("a", "m", "p")
    assert bus.ack("w", "a", 1_000_000) == 1_000_000
    bus.post("a", "later", "p")
    assert bus.fetch("w", "a") == []  # everything posted below the bogus ack is skipped
    with pytest.raises(AckBeyondHead):
        reference(url, opened).ack("w", "a", 2_000_000)


def test_flood_on_join(url: str, opened: list[Bus]) -> None:
    bus = mutant("flood-on-join", url, opened)
    for i in range(3):
        bus.post("a", f"old{i}", "p")
    assert bus.subscribe("new", "a", at="head") == 0
    assert [m.seq for m in bus.fetch("new", "a")] == [1, 2, 3]
    bus.ack("new", "a", 2)
    assert bus.subscribe("new", "a") == 2  # an existing cursor is still kept


def test_resubscribe_resets_the_cursor_to_head(url: str, opened: list[Bus]) -> None:
    bus = mutant("resubscribe-resets-cursor", url, opened)
    assert bus.subscribe("w", "a") == 0
    for i in range(4):
        bus.post("a", f"m{i}", "p")
    bus.ack("w", "a", 1)
    assert bus.subscribe("w", "a") == 4  # seqs 2..4 silently skipped
    assert bus.fetch("w", "a") == []


# -- posting ---------------------------------------------------------------------


def test_no_idempotency_double_posts(url: str, opened: list[Bus]) -> None:
    bus = mutant("no-idempotency", url, opened)
    first = bus.post("a", "body", "p", idempotency_key="k")
    again = bus.post("a", "body", "p", idempotency_key="k")
    assert (first.seq, again.seq) == (1, 2)
    assert bus.head("a") == 2


def test_seq_outside_lock_collides_across_connections(url: str, opened: list[Bus]) -> None:
    bus = mutant("seq-outside-lock", url, opened)
    assert isinstance(bus, SeqOutsideLockBus)
    assert Path(bus.path).name == "bus.seq-outside-lock.db"
    bus.post("a", "m1", "p")
    # Another process holds the write lock and is appending seq 2 right now.
    other = sqlite3.connect(bus.path, isolation_level=None, timeout=10)
    other.execute("BEGIN IMMEDIATE")
    other.execute(
        "INSERT INTO messages (channel, seq, body, sender, idem_key, posted_at)"
        " VALUES ('a', 2, 'theirs', 'q', NULL, 0)"
    )
    result: list[int] = []
    poster = threading.Thread(target=lambda: result.append(bus.post("a", "mine", "p").seq))
    poster.start()
    time.sleep(0.2)  # the poster has read head 1 and now waits for the lock
    other.execute("COMMIT")
    other.close()
    poster.join(10)
    assert result == [2]
    bus.subscribe("w", "a", at="start")
    page = sorted((m.seq, m.body) for m in bus.fetch("w", "a"))
    assert page == [(1, "m1"), (2, "mine"), (2, "theirs")]  # two messages at seq 2


# -- reading ---------------------------------------------------------------------


def test_batch_end_as_head_strands_the_tail(url: str, opened: list[Bus]) -> None:
    bus = mutant("batch-end-as-head", url, opened)
    bus.subscribe("w", "a")
    for i in range(5):
        bus.post("a", f"m{i}", "p")
    assert [m.seq for m in bus.fetch("w", "a", limit=2)] == [1, 2]
    assert bus.fetch("w", "a", after=2, limit=2) == []  # "head", says the bus
    ref = reference(url, opened)
    assert [m.seq for m in ref.fetch("w", "a", after=2, limit=2)] == [3, 4]


def test_off_by_one_read_skips_a_message(url: str, opened: list[Bus]) -> None:
    bus = mutant("off-by-one-read", url, opened)
    bus.subscribe("w", "a")
    for i in range(3):
        bus.post("a", f"m{i}", "p")
    assert [m.seq for m in bus.fetch("w", "a")] == [2, 3]


def test_fetch_consumes(url: str, opened: list[Bus]) -> None:
    bus = mutant("fetch-consumes", url, opened)
    bus.subscribe("w", "a")
    for i in range(4):
        bus.post("a", f"m{i}", "p")
    assert [m.seq for m in bus.fetch("w", "a", limit=3)] == [1, 2, 3]
    assert bus.cursor("w", "a") == 3  # acked before anyone handled them
    assert [m.seq for m in bus.fetch("w", "a", after=1)] == [2, 3, 4]  # pages still peek
    assert bus.cursor("w", "a") == 3


# -- the doorbell ----------------------------------------------------------------


def test_consuming_waiter_acks_what_it_rings_for(url: str, opened: list[Bus]) -> None:
    bus = mutant("consuming-waiter", url, opened)
    bus.subscribe("w", "a")
    bus.post("a", "m1", "p")
    wake = bus.wait("w", 1.0)
    assert wake is not None and wake.seq == 1
    assert bus.cursor("w", "a") == 1
    assert bus.fetch("w", "a") == []  # delivered to nobody


def test_own_post_rings(url: str, opened: list[Bus]) -> None:
    bus = mutant("own-post-ring", url, opened)
    bus.subscribe("w", "a")
    bus.post("a", "my reply", "w")
    wake = bus.wait("w", 0.5)
    assert wake is not None and wake.sender == "w" and wake.reason == "backlog"
    assert reference(url, opened).wait("w", 0.1) is None


def _post_from_elsewhere(path: str, delay: float) -> threading.Thread:
    """Append a message through a raw connection, as another process would:
    no in-process notification."""

    def run() -> None:
        time.sleep(delay)
        db = sqlite3.connect(path, isolation_level=None, timeout=10)
        db.execute("BEGIN IMMEDIATE")
        db.execute(
            "INSERT INTO messages (channel, seq, body, sender, idem_key, posted_at)"
            " VALUES ('a', (SELECT COALESCE(MAX(seq), 0) + 1 FROM messages"
            " WHERE channel = 'a'), 'remote', 'other', NULL, 0)"
        )
        db.execute("COMMIT")
        db.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_no_cross_process_poll_misses_remote_posts(url: str, opened: list[Bus]) -> None:
    bus = mutant("no-cross-process-poll", url, opened)
    bus.subscribe("w", "a")
    poster = _post_from_elsewhere(bus.path, 0.1)
    assert bus.wait("w", 0.6) is None  # slept through a post by someone else
    poster.join()
    bus.ack("w", "a", 1)
    ref = reference(url, opened)
    poster = _post_from_elsewhere(ref.path, 0.1)
    started = time.monotonic()
    wake = ref.wait("w", 2.0)
    poster.join()
    assert wake is not None and wake.sender == "other"
    assert time.monotonic() - started < 1.0
