"""The reference SQLite bus against every row of the broadcast contract,
including two OS processes acking and posting concurrently on one file."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
import time
from pathlib import Path

import pytest

from knell.buses import AckBeyondHead, DefiniteError, DriverError, open_bus
from knell.buses.sqlite import SqliteBus


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{(tmp_path / 'bus.db').as_posix().lstrip('/')}?poll_interval=0.02"


@pytest.fixture
def bus(url: str) -> SqliteBus:
    b = open_bus(url)
    assert isinstance(b, SqliteBus)
    yield b
    b.close()


def test_seq_is_dense_per_channel(bus: SqliteBus) -> None:
    seqs = [bus.post("a", f"m{i}", "p").seq for i in range(5)]
    assert seqs == [1, 2, 3, 4, 5]
    assert bus.post("b", "x", "p").seq == 1
    assert bus.head("a") == 5 and bus.head("b") == 1 and bus.head("none") == 0


def test_idempotency_key_returns_original(bus: SqliteBus) -> None:
    first = bus.post("a", "body", "p", idempotency_key="k")
    bus.post("a", "other", "p")
    again = bus.post("a", "body-retry", "p", idempotency_key="k")
    assert again.seq == first.seq and again.body == "body"
    assert bus.head("a") == 2


def test_interleaved_connections_keep_seqs_dense(url: str) -> None:
    """Two connections take turns: each one's remembered head is stale on
    almost every post, so the guessed-seq fast path must fall back to
    MAX(seq) + 1 without a gap, a duplicate or a lost append."""
    a, b = open_bus(url), open_bus(url)
    try:
        seqs = []
        for i in range(40):
            poster = a if i % 3 else b
            seqs.append(poster.post("a", f"m{i}", "p", idempotency_key=f"k{i}").seq)
        assert seqs == list(range(1, 41))
        # retries with a stale remembered head still return the original
        for i in (0, 17, 39):
            again = (b if i % 2 else a).post("a", "retry", "p", idempotency_key=f"k{i}")
            assert (again.seq, again.body) == (i + 1, f"m{i}")
        assert a.head("a") == b.head("a") == 40
        assert [m.seq for m in a.fetch("x", "a", after=0, limit=100)] == list(range(1, 41))
    finally:
        a.close()
        b.close()


def test_post_while_the_store_is_locked_is_definite(tmp_path: Path) -> None:
    holder = sqlite3.connect(tmp_path / "bus.db", isolation_level=None)
    bus = SqliteBus(tmp_path / "bus.db", busy_timeout=0.05)
    try:
        bus.post("a", "first", "p")  # remembers the head: the next post guesses
        holder.execute("BEGIN IMMEDIATE")
        for _ in range(2):  # the guessed path, then the MAX(seq) + 1 path
            with pytest.raises(DefiniteError, match="write lock"):
                bus.post("a", "blocked", "p", idempotency_key="k")
            bus._heads.clear()
        holder.execute("ROLLBACK")
        assert bus.post("a", "later", "p", idempotency_key="k").seq == 2
    finally:
        holder.close()
        bus.close()


def test_join_at_head_no_flood(bus: SqliteBus) -> None:
    for i in range(3):
        bus.post("a", f"old{i}", "p")
    assert bus.subscribe("w", "a") == 3
    assert bus.fetch("w", "a") == []
    assert bus.subscribe("h", "a", at="start") == 0
    assert [m.seq for m in bus.fetch("h", "a")] == [1, 2, 3]


def test_resubscribe_never_moves_cursor(bus: SqliteBus) -> None:
    bus.subscribe("w", "a")
    for i in range(4):
        bus.post("a", f"m{i}", "p")
    bus.ack("w", "a", 2)
    assert bus.subscribe("w", "a") == 2
    assert bus.subscribe("w", "a", at="start") == 2
    assert bus.cursor("w", "a") == 2


def test_fetch_is_a_peek(bus: SqliteBus) -> None:
    bus.subscribe("w", "a")
    for i in range(3):
        bus.post("a", f"m{i}", "p")
    assert [m.body for m in bus.fetch("w", "a")] == ["m0", "m1", "m2"]
    assert [m.body for m in bus.fetch("w", "a")] == ["m0", "m1", "m2"]
    assert bus.cursor("w", "a") == 0
    assert [m.seq for m in bus.fetch("w", "a", after=1, limit=1)] == [2]


def test_ack_forward_only_and_beyond_head_refused(bus: SqliteBus) -> None:
    bus.subscribe("w", "a")
    for i in range(5):
        bus.post("a", f"m{i}", "p")
    assert bus.ack("w", "a", 4) == 4
    assert bus.ack("w", "a", 2) == 4  # stale ack is a no-op
    with pytest.raises(AckBeyondHead):
        bus.ack("w", "a", 6)
    assert bus.cursor("w", "a") == 4
    with pytest.raises(DefiniteError):
        bus.ack("nobody", "a", 1)


def test_wait_rings_on_backlog_at_once(bus: SqliteBus) -> None:
    bus.subscribe("w", "a")
    bus.post("a", "m", "other")
    start = time.monotonic()
    wake = bus.wait("w", 2.0)
    assert wake is not None and wake.reason == "backlog" and wake.seq == 1
    assert time.monotonic() - start < 0.5
    assert not hasattr(wake, "body")


def test_wait_ignores_own_posts(bus: SqliteBus) -> None:
    bus.subscribe("w", "a")
    bus.post("a", "mine", "w")
    assert bus.wait("w", 0.2) is None


def _post_later(url: str, delay: float) -> None:
    time.sleep(delay)
    b = open_bus(url)
    b.post("a", "from-another-process", "other")
    b.close()


@pytest.mark.integration  # starts a posting process
def test_wait_sees_posts_from_another_process(bus: SqliteBus, url: str) -> None:
    bus.subscribe("w", "a")
    proc = mp.get_context("spawn").Process(target=_post_later, args=(url, 0.3))
    proc.start()
    try:
        wake = bus.wait("w", 5.0)
    finally:
        proc.join(10)
    assert wake is not None and wake.reason == "post" and wake.sender == "other"


def _hammer(url: str, name: str, n: int) -> None:
    b = open_bus(url)
    b.subscribe("shared", "a")
    for i in range(n):
        m = b.post("a", f"{name}:{i}", name)
        b.ack("shared", "a", max(1, m.seq - 3))  # deliberately stale acks too
    b.close()


@pytest.mark.integration  # starts two processes
def test_two_processes_post_and_ack_concurrently(url: str) -> None:
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_hammer, args=(url, f"p{i}", 150)) for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    b = open_bus(url)
    messages = []
    after = 0
    while page := b.fetch("shared", "a", after=after, limit=64):
        messages += page
        after = page[-1].seq
    assert [m.seq for m in messages] == list(range(1, 301))  # dense, no duplicates
    assert len({m.body for m in messages}) == 300
    assert b.cursor("shared", "a") == 297  # forward-only: the max of all acks
    b.close()


def test_driver_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(DriverError, match="unknown scheme"):
        open_bus("nosuch://x")
    with pytest.raises(DriverError, match=r"'nosuch://u:\*\*\*@h/db': unknown scheme"):
        open_bus("nosuch://u:Sekr1t@h/db")  # quoted without its password
    with pytest.raises(DriverError, match="cannot import"):
        open_bus(f"sqlite:///{tmp_path}/x.db", driver="no_such_module_xyz:make")
    with pytest.raises(DriverError, match=r"raised ValueError: .*unknown option"):
        open_bus(f"sqlite:///{tmp_path}/x.db?bogus=1")
    with pytest.raises(DriverError, match="raised TypeError"):
        open_bus(f"sqlite:///{tmp_path}/x.db", driver="os:getcwd")
    with pytest.raises(DriverError, match="returned a str, which is not a bus: it has no post"):
        open_bus(f"sqlite:///{tmp_path}/x.db", driver="os:fspath")


def test_module_factory_driver(tmp_path: Path) -> None:
    b = open_bus(
        f"sqlite:///{tmp_path.as_posix().lstrip('/')}/x.db", driver="knell.buses.sqlite:open_sqlite"
    )
    assert b.post("a", "x", "p").seq == 1
    b.close()


def test_a_rings_rows_are_deleted_in_batches_and_never_read(bus: SqliteBus) -> None:
    """Rows below ``first`` go every TRIM_EVERY posts: the file holds at most
    that many more than the ring, and no tail ever shows one of them."""
    from knell.buses.sqlite_stream import TRIM_EVERY

    bus.declare_stream("ticks", max_len=5)
    for i in range(3 * TRIM_EVERY + 7):
        bus.post("ticks", f"m{i}", "p")
        page = bus.tail("ticks")
        assert len(page.messages) == min(i + 1, 5) and page.messages[0].seq == page.first
        (rows,) = bus._db.execute(
            "SELECT COUNT(*) FROM messages WHERE channel = 'ticks'"
        ).fetchone()
        assert rows <= 5 + TRIM_EVERY
    (rows,) = bus._db.execute("SELECT COUNT(*) FROM messages WHERE channel = 'ticks'").fetchone()
    assert rows == 5 + 7  # deleted at the last multiple of TRIM_EVERY, then seven more posts
