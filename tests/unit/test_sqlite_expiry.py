"""Message expiry on the reference SQLite bus, read path by read path.

Expiry is judged by the bus's clock at each read, so these tests post
messages that expired a minute ago or expire in a minute: no sleeping,
no race with the clock.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from knell.buses import open_bus
from knell.buses.contract import EXPIRY, features_of
from knell.buses.sqlite import SqliteBus


@pytest.fixture
def bus(tmp_path: Path) -> SqliteBus:
    b = open_bus(f"sqlite:///{(tmp_path / 'bus.db').as_posix().lstrip('/')}?poll_interval=0.02")
    assert isinstance(b, SqliteBus)
    yield b
    b.close()


PAST = -60.0
FUTURE = 60.0


def _post(bus: SqliteBus, channel: str, body: str, ttl: float | None, sender: str = "p") -> int:
    expires = None if ttl is None else time.time() + ttl
    return bus.post(channel, body, sender, expires_at=expires).seq


def test_the_reference_bus_declares_expiry(bus: SqliteBus) -> None:
    assert EXPIRY in features_of(bus)
    assert features_of(object()) == frozenset()


def test_fetch_skips_expired_and_keeps_pages_full(bus: SqliteBus) -> None:
    bus.subscribe("r", "c", at="start")
    _post(bus, "c", "old", PAST)
    _post(bus, "c", "live", FUTURE)
    _post(bus, "c", "old2", PAST)
    _post(bus, "c", "forever", None)
    page = bus.fetch("r", "c", limit=2)
    assert [m.body for m in page] == ["live", "forever"]
    assert [m.body for m in bus.fetch("r", "c", after=0)] == ["live", "forever"]


def test_forensic_fetch_still_finds_expired(bus: SqliteBus) -> None:
    bus.subscribe("r", "c", at="start")
    _post(bus, "c", "old", PAST)
    _post(bus, "c", "live", FUTURE)
    page = bus.fetch("r", "c", include_expired=True)
    assert [m.body for m in page] == ["old", "live"]


def test_wait_never_rings_for_expired_backlog(bus: SqliteBus) -> None:
    bus.subscribe("w", "c", at="start")
    _post(bus, "c", "old", PAST, sender="other")
    assert bus.wait("w", 0.1) is None
    seq = _post(bus, "c", "live", FUTURE, sender="other")
    wake = bus.wait("w", 0.1)
    assert wake is not None and wake.seq == seq and wake.reason == "backlog"


def test_wait_never_rings_for_an_expired_post(bus: SqliteBus) -> None:
    bus.subscribe("w", "c")
    other = open_bus(f"sqlite:///{bus.path.lstrip('/')}")

    def post_later(body: str, ttl: float) -> threading.Timer:
        timer = threading.Timer(
            0.05,
            lambda: other.post("c", body, "other", expires_at=time.time() + ttl),  # type: ignore[call-arg]
        )
        timer.start()
        return timer

    try:
        timer = post_later("old", PAST)
        assert bus.wait("w", 0.3) is None
        timer.join()
        timer = post_later("live", FUTURE)
        wake = bus.wait("w", 2.0)
        timer.join()
    finally:
        other.close()
    # The live post is timed to land during the wait, but on a loaded machine the wait
    # may start after it (a bridge wait is an HTTP round trip): then it rings as backlog.
    # Either way it must ring for seq 2 and never for the expired seq 1.
    assert wake is not None and wake.seq == 2 and wake.sender == "other"
    assert wake.reason in ("post", "backlog")


def test_claim_skips_expired_and_never_dead_letters_it(bus: SqliteBus) -> None:
    bus.declare_queue("q", 1)
    _post(bus, "q", "old", PAST)
    live = _post(bus, "q", "live", FUTURE)
    claim = bus.claim("q", "c1", 30)
    assert claim is not None and claim.seq == live
    assert bus.claim("q", "c2", 30) is None
    assert bus.dead("q") == []


def test_a_lease_lapsing_after_expiry_retires_the_message_not_dead(bus: SqliteBus) -> None:
    bus.declare_queue("q", 1)
    _post(bus, "q", "soon", 0.1)
    claim = bus.claim("q", "c1", 0.2)
    assert claim is not None
    time.sleep(0.25)  # the lease lapsed (deliveries used up) after the message expired
    assert bus.claim("q", "c2", 30) is None
    assert bus.dead("q") == []


def test_a_lease_on_a_message_that_then_expires_stays_the_holders(bus: SqliteBus) -> None:
    bus.declare_queue("q", 3)
    _post(bus, "q", "soon", 0.1)
    claim = bus.claim("q", "c1", 30)
    assert claim is not None
    time.sleep(0.15)
    bus.renew(claim.id, "c1", 30)
    bus.done(claim.id, "c1")
    assert bus.claim("q", "c2", 30) is None


def test_release_after_expiry_retires_the_message(bus: SqliteBus) -> None:
    bus.declare_queue("q", 1)
    _post(bus, "q", "soon", 0.1)
    claim = bus.claim("q", "c1", 30)
    assert claim is not None
    time.sleep(0.15)
    bus.release(claim.id, "c1")
    assert bus.dead("q") == []
    assert bus.claim("q", "c2", 30) is None


def test_a_used_up_message_that_never_expired_still_dies(bus: SqliteBus) -> None:
    bus.declare_queue("q", 1)
    _post(bus, "q", "work", FUTURE)
    claim = bus.claim("q", "c1", 0.05)
    assert claim is not None
    time.sleep(0.1)
    assert [d.seq for d in bus.dead("q")] == [claim.seq]


def test_receive_skips_expired(bus: SqliteBus) -> None:
    bus.claim_role("inbox", "run-1", 30)
    _post(bus, "inbox", "old", PAST)
    live = _post(bus, "inbox", "live", FUTURE)
    assert [d.seq for d in bus.receive("run-1")] == [live]
    assert bus.receive("run-1") == []


def test_a_file_from_before_expiry_gets_the_column(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE messages (channel TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL,"
        " sender TEXT NOT NULL, idem_key TEXT, posted_at REAL NOT NULL,"
        " PRIMARY KEY (channel, seq)) WITHOUT ROWID"
    )
    db.execute("INSERT INTO messages VALUES ('c', 1, 'kept', 'p', NULL, 0)")
    db.commit()
    db.close()
    bus = SqliteBus(path)
    try:
        bus.subscribe("r", "c", at="start")
        assert [m.body for m in bus.fetch("r", "c")] == ["kept"]
    finally:
        bus.close()
